// Go to Turn: the trajectory viewer at a turn (a turn's CodeLens in the viewer).
import { command } from '../context';

export const trajectoryGoToTurnCommand = command('turnwise.trajectory.goToTurn', async (ctx, index: number) => ctx.editors.setTurn(index));
