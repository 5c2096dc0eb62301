import { valueOptions, type CliCommand } from '../command';
import { formatDoctorReport, runDoctor } from '../../train/doctor';

export const doctorCommand: CliCommand = {
  name: 'doctor',
  summary: 'check Node, Docker, sandbox images and their agent tools, ONNX Runtime providers, tree-sitter grammars and the embedded policy',
  usage: '[--docker-host URL] [--json]',
  options: valueOptions('docker-host'),
  async run(args, io) {
    const report = await runDoctor({ dockerHost: args.values['docker-host'] as string | undefined });
    io.out(io.json ? JSON.stringify(report, null, 2) : formatDoctorReport(report));
    return report.ok ? 0 : 1;
  },
};
