// Next Turn of the trajectory viewer (Alt+Down, its editor title bar).
import { command } from '../context';

export const trajectoryNextTurnCommand = command('turnwise.trajectory.nextTurn', async (ctx) => ctx.editors.step(1));
