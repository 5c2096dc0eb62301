// The extension's heavier dependencies (Docker client, ONNX Runtime probes, the doctor), built
// into their own bundle (dist/extension-services.js) and loaded on the first command that needs
// them: activation loads only the views.
export { formatDoctorReport, runDoctor } from '../train/doctor';
export { doctorReport } from '../core/doctor';
export { connectEngine, disposeAllSandboxes, engineInfo, reapAtStartup } from '../sandbox';
export {
  AdapterNeedsBase,
  adapterLoraBlock,
  adapterOnBase,
  checkLoraSetting,
  checkModelFolder,
  describeLora,
  modelChecks,
  ModelRefused,
} from './model/modelChoice';
export { memoryPlanCheck } from '../train/memory-plan';
export { evalReport } from '../eval/report';
