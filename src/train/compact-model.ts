// The ONNX policy as the agent's ActionModel in the compact format (chat-model.ts is the chat format's): each episode keeps one sequence (its KV cache) in
// the policy worker. A turn re-renders the prompt (task + latest turns that fit) and resets the
// sequence to it, which keeps the cache of the common prefix: a new observation is appended, not
// re-prefilled; only when old turns are dropped for room is the context recomputed.
import type { ActionModel, ActRequest, ActResult } from '../agent/types';
import type { PolicyService, SequenceId } from '../policy/trainable';
import { renderPrompt, type CompactCodec } from './compact-codec';

export interface SamplingOptions {
  contextTokens: number;
  maxActionTokens: number;
  temperature: number;
  topP: number;
}

export class CompactActionModel implements ActionModel {
  private readonly seqs = new Map<string, Promise<SequenceId>>();
  /** Prompt tokens fed and tokens generated, for throughput figures. */
  promptTokens = 0;
  sampledTokens = 0;

  constructor(
    private readonly policy: PolicyService,
    private readonly codec: CompactCodec,
    private readonly o: SamplingOptions,
  ) {}

  /** The prompt budget: the context less room for the action. */
  get promptBudget(): number {
    return this.o.contextTokens - this.o.maxActionTokens;
  }

  async act(requests: readonly ActRequest[]): Promise<ActResult[]> {
    const seqIds: SequenceId[] = [];
    for (const r of requests) {
      const { ids } = renderPrompt(this.codec, r.task, r.turns, this.promptBudget);
      let seq = this.seqs.get(r.episodeId);
      if (!seq) {
        seq = this.policy.newSequence();
        this.seqs.set(r.episodeId, seq);
      }
      const id = await seq;
      await this.policy.reset(id, ids);
      this.promptTokens += ids.length;
      seqIds.push(id);
    }
    const rows = await this.policy.sample(
      requests.map((r, i) => ({
        seq: seqIds[i],
        seed: r.seed,
        maxNewTokens: this.o.maxActionTokens,
        temperature: this.o.temperature,
        topP: this.o.topP,
        stopIds: [this.codec.imEnd],
      })),
    );
    return rows.map((row) => {
      this.sampledTokens += row.tokenIds.length;
      const body = row.finishReason === 'stop' ? row.tokenIds.slice(0, -1) : row.tokenIds;
      return { text: this.codec.decode(body), tokenIds: row.tokenIds, logprobs: row.logprobs, finishReason: row.finishReason };
    });
  }

  release(episodeId: string): void {
    const seq = this.seqs.get(episodeId);
    if (!seq) return;
    this.seqs.delete(episodeId);
    void seq.then((id) => this.policy.release(id)).catch(() => undefined);
  }
}
