// `turnwise doctor` / "Turnwise: Check Environment": every piece a run needs, tried for real.
// A required check that fails makes the report fail; optional ones (GPU providers) only warn.
// This file only lists the checks, in report order; each lives next to the code it checks:
//   node                      core/doctor.ts (also Check, DoctorReport and the text format)
//   docker, sandbox images,   sandbox/doctor.ts (the engine answers; base and language images
//   agent tools                 are built; tw-test/tw-suspects are in the Python image)
//   onnxruntime cpu|cuda|webgpu  onnx/doctor.ts (each provider creates a session and runs; then
//   webgpu adapter               the adapters WebGPU would use, GPU or software: onnx/adapters.ts)
//   tree-sitter grammars      ast/doctor.ts (each grammar loads and parses)
//   embedded policy           train/embedded.ts (the shipped checkpoint loads)
import { doctorReport, nodeCheck, type DoctorReport } from '../core/doctor';
import { grammarCheck } from '../ast/doctor';
import { providerChecks } from '../onnx/doctor';
import { sandboxChecks } from '../sandbox/doctor';
import { embeddedPolicyCheck } from './embedded';

export { formatDoctorReport, type Check, type CheckStatus, type DoctorReport } from '../core/doctor';

export interface DoctorOptions {
  dockerHost?: string;
  /** Minimum Node major version. */
  minNode?: number;
}

export async function runDoctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  return doctorReport([
    nodeCheck(options.minNode ?? 20),
    ...(await sandboxChecks(options.dockerHost)),
    ...(await providerChecks()),
    await grammarCheck(),
    embeddedPolicyCheck(),
  ]);
}
