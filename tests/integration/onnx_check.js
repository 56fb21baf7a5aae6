// Runs an ONNX model written by `zdist export` with ONNX Runtime (npm's
// onnxruntime-node) on an IDX test set, as zdist reads it (pixels / 255,
// one example per image), and compares each example's output with zdist's
// own predictions (`zdist run --dump-predictions`, one line per example).
// Usage: node onnx_check.js MODEL.onnx IMAGES.idx.gz LABELS.idx.gz PREDICTIONS.txt SHAPE [softmax]
//        node onnx_check.js MODEL.onnx TEST.svm - PREDICTIONS.txt sparse
// (SHAPE: one example's input shape, e.g. 784 or 28,28,1; softmax: the
// model gives logits, compared after a softmax of each row; sparse: libsvm
// examples fed as "ids" and "values" [N, K], padded with value 0, and one
// sigmoid output). Prints one JSON line: examples, the largest absolute
// difference, both accuracies (and for sparse, both ROC AUCs).
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const ort = require('onnxruntime-node');

function readIdx(path) {
  let buf = fs.readFileSync(path);
  if (path.endsWith('.gz')) buf = zlib.gunzipSync(buf);
  const rank = buf[3];
  const dims = [];
  for (let i = 0; i < rank; i++) dims.push(buf.readUInt32BE(4 + 4 * i));
  return {dims, data: buf.subarray(4 + 4 * rank)};
}

function argmax(a, off, n) {
  let best = 0;
  for (let j = 1; j < n; j++) if (a[off + j] > a[off + best]) best = j;
  return best;
}

function readSvm(path) {
  const rows = [];
  for (const line of fs.readFileSync(path, 'utf8').split('\n')) {
    const tok = line.trim().split(/\s+/).filter(t => t);
    if (!tok.length) continue;
    const ids = [], vals = [];
    for (const t of tok.slice(1)) {
      const [i, v] = t.split(':');
      ids.push(BigInt(i));
      vals.push(Number(v));
    }
    rows.push({label: Number(tok[0]) > 0 ? 1 : 0, ids, vals});
  }
  return rows;
}

// Exact ROC AUC: the probability a positive scores above a negative (ties half).
function auc(scores, labels) {
  const idx = scores.map((s, i) => i).sort((a, b) => scores[a] - scores[b]);
  let rankSum = 0, pos = 0;
  for (let i = 0; i < idx.length;) {
    let j = i;
    while (j < idx.length && scores[idx[j]] === scores[idx[i]]) j++;
    for (let k = i; k < j; k++) if (labels[idx[k]]) { rankSum += (i + j + 1) / 2; pos++; }
    i = j;
  }
  const neg = idx.length - pos;
  return (rankSum - pos * (pos + 1) / 2) / (pos * neg);
}

async function sparse(model, svmPath, predPath) {
  const rows = readSvm(svmPath);
  const want = fs.readFileSync(predPath, 'utf8').trim().split('\n').map(Number);
  if (want.length !== rows.length) throw new Error(`${predPath}: ${want.length} lines, ${rows.length} examples`);
  const session = await ort.InferenceSession.create(model);
  const got = [];
  for (let b = 0; b < rows.length; b += 500) {
    const part = rows.slice(b, b + 500);
    const k = Math.max(1, ...part.map(r => r.ids.length));
    const ids = new BigInt64Array(part.length * k), vals = new Float32Array(part.length * k);
    part.forEach((r, i) => r.ids.forEach((id, j) => { ids[i * k + j] = id; vals[i * k + j] = r.vals[j]; }));
    const out = await session.run({ids: new ort.Tensor('int64', ids, [part.length, k]),
                                   values: new ort.Tensor('float32', vals, [part.length, k])});
    got.push(...out[session.outputNames[0]].data);
  }
  const labels = rows.map(r => r.label);
  let maxDiff = 0, cOnnx = 0, cZdist = 0;
  got.forEach((g, i) => {
    maxDiff = Math.max(maxDiff, Math.abs(g - want[i]));
    cOnnx += (g > 0.5 ? 1 : 0) === labels[i];
    cZdist += (want[i] > 0.5 ? 1 : 0) === labels[i];
  });
  console.log(JSON.stringify({examples: rows.length, outputs: 1, input: session.inputNames.join(','),
                              output: session.outputNames[0], max_abs_diff: maxDiff,
                              accuracy_onnx: cOnnx / rows.length, accuracy_zdist: cZdist / rows.length,
                              auc_onnx: auc(got, labels), auc_zdist: auc(want, labels)}));
}

async function main() {
  const [model, imagesPath, labelsPath, predPath, shapeArg, link] = process.argv.slice(2);
  if (shapeArg === 'sparse') return sparse(model, imagesPath, predPath);
  const shape = shapeArg.split(',').map(Number);
  const per = shape.reduce((a, b) => a * b, 1);
  const images = readIdx(imagesPath), labels = readIdx(labelsPath);
  const n = images.dims[0];
  if (images.data.length !== n * per) throw new Error(`images: ${images.data.length} bytes, ${n} x ${per} expected`);
  const want = fs.readFileSync(predPath, 'utf8').trim().split('\n').map(l => l.trim().split(/\s+/).map(Number));
  if (want.length !== n) throw new Error(`${predPath}: ${want.length} lines, ${n} examples`);
  const session = await ort.InferenceSession.create(model);
  const input = session.inputNames[0], output = session.outputNames[0];
  const batch = 500;
  let maxDiff = 0, correctOnnx = 0, correctZdist = 0, width = 0;
  for (let b = 0; b < n; b += batch) {
    const m = Math.min(batch, n - b);
    const x = new Float32Array(m * per);
    for (let i = 0; i < m * per; i++) x[i] = images.data[b * per + i] / 255;
    const out = await session.run({[input]: new ort.Tensor('float32', x, [m, ...shape])});
    const y = Float32Array.from(out[output].data);
    width = y.length / m;
    if (link === 'softmax')
      for (let i = 0; i < m; i++) {
        const row = y.subarray(i * width, (i + 1) * width);
        const top = Math.max(...row);
        let sum = 0;
        for (let j = 0; j < width; j++) sum += Math.exp(row[j] - top);
        for (let j = 0; j < width; j++) row[j] = Math.exp(row[j] - top) / sum;
      }
    for (let i = 0; i < m; i++) {
      const w = want[b + i];
      if (w.length !== width) throw new Error(`example ${b + i}: ${w.length} numbers from zdist, ${width} from ONNX`);
      for (let j = 0; j < width; j++) maxDiff = Math.max(maxDiff, Math.abs(y[i * width + j] - w[j]));
      const label = labels.data[b + i];
      if (argmax(y, i * width, width) === label) correctOnnx++;
      if (argmax(w, 0, width) === label) correctZdist++;
    }
  }
  console.log(JSON.stringify({examples: n, outputs: width, input, output, max_abs_diff: maxDiff,
                              accuracy_onnx: correctOnnx / n, accuracy_zdist: correctZdist / n}));
}

main().catch(e => { console.error(`onnx_check.js: ${e.stack || e}`); process.exit(1); });
