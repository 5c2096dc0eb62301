// Shipped resources found by one rule (core/resources.ts): next to the running code, then in the
// package root (the folder of Turnwise's package.json). Here, from a source checkout: the root
// is the repository, and each resource the product uses is found where the checkout keeps it.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { findResource, packageRoot, resourceCandidates } from '../../../src/core/resources';
import { sandboxImagesDir } from '../../../src/sandbox/images';
import { embeddedModelDir } from '../../../src/train/embedded';
import { demoWorkspace } from '../../../src/cli/commands/options';
import { torchScriptPath } from '../../../src/bench/model';

const REPO = path.resolve(__dirname, '..', '..', '..');

describe('core/resources: one rule for the files Turnwise ships', () => {
  it("the package root is the folder of Turnwise's package.json", () => {
    assert.equal(packageRoot(), REPO);
    assert.equal(JSON.parse(fs.readFileSync(path.join(packageRoot()!, 'package.json'), 'utf8')).name, 'turnwise');
  });

  it('looks next to the code first, then in the package root; a marker decides', () => {
    const c = resourceCandidates('models');
    assert.equal(c.length, 2);
    assert.equal(c[1], path.join(REPO, 'models'));
    assert.equal(findResource('models', path.join('turnwise-tiny', 'model.safetensors')), path.join(REPO, 'models'));
    assert.equal(findResource('models', 'no-such-file'), undefined);
    assert.equal(findResource('no-such-folder'), undefined);
  });

  it('the sandbox images, the embedded model, the demo workspace and the torch script are found in the checkout', () => {
    assert.equal(sandboxImagesDir(), path.join(REPO, 'sandbox-images'));
    assert.equal(embeddedModelDir(), path.join(REPO, 'models', 'turnwise-tiny'));
    assert.equal(demoWorkspace(), path.join(REPO, 'examples', 'demo-python'));
    assert.equal(torchScriptPath(), path.join(REPO, 'scripts', 'compare', 'torch_model_bench.py'));
  });
});
