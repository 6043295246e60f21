// run.js runs an ONNX model in ONNX Runtime for orthonet's tests:
//
//   node run.js RUNTIME_DIR MODEL REQUEST
//
// RUNTIME_DIR holds node_modules/onnxruntime-node (make deps installs it in
// build/onnxruntime). REQUEST is a JSON file {"inputs": {NAME: {"type":
// "float32" | "float64", "dims": [...], "data": [...]}}}. It prints the
// outputs as {"outputs": {NAME: {"type", "dims", "data"}}, "versions": ...}.
// Numbers go both ways as JSON doubles, which hold float32 values exactly.
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [dir, model, request] = process.argv.slice(2);
  const ort = require(path.join(path.resolve(dir), 'node_modules', 'onnxruntime-node'));
  const req = JSON.parse(fs.readFileSync(request, 'utf8'));
  const session = await ort.InferenceSession.create(model, { executionProviders: ['cpu'] });
  const feeds = {};
  for (const [name, t] of Object.entries(req.inputs)) {
    const data = t.type === 'float64' ? Float64Array.from(t.data) : Float32Array.from(t.data);
    feeds[name] = new ort.Tensor(t.type, data, t.dims);
  }
  const results = await session.run(feeds);
  const outputs = {};
  for (const [name, t] of Object.entries(results)) {
    outputs[name] = { type: t.type, dims: Array.from(t.dims), data: Array.from(t.data) };
  }
  process.stdout.write(JSON.stringify({ outputs, versions: ort.env.versions }));
}

main().catch((e) => {
  process.stderr.write(String((e && e.message) || e).split('\n')[0] + '\n');
  process.exit(1);
});
