// Trajectory validation lives in core (core/trajectory.ts) so every layer reads trajectories the
// same way; these names stay for existing callers.
export { parseTrajectories, readTrajectories, trajectoryProblems } from '../core/trajectory';
