// Previous Turn of the trajectory viewer (Alt+Up, its editor title bar).
import { command } from '../context';

export const trajectoryPreviousTurnCommand = command('turnwise.trajectory.previousTurn', async (ctx) => ctx.editors.step(-1));
