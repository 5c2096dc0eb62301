// Show Log: the "Turnwise" output channel.
import { command } from './context';

export const showLogCommand = command('turnwise.showLog', async (ctx) => ctx.log.show());
