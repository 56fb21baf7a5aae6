// Runs an ONNX model written by `zdist export` with ONNX Runtime (npm's
// onnxruntime-node) on an IDX test set, as zdist reads it (pixels / 255,
// one example per image), and compares each example's output with zdist's
// own predictions (`zdist run --dump-predictions`, one line per example).
// Usage: node onnx_check.js MODEL.onnx IMAGES.idx.gz LABELS.idx.gz PREDICTIONS.txt SHAPE [softmax]
//        node onnx_check.js MODEL.onnx TEST.svm - PREDICTIONS.txt sparse
//        node onnx_check.js MODEL.onnx FEEDS.json - PREDICTIONS.txt feeds
// (SHAPE: one example's input shape, e.g. 784 or 28,28,1; softmax: the
// model gives logits, compared after a softmax of each row; sparse: libsvm
// examples fed as "ids" and "values" [N, K], padded with value 0, and one
// sigmoid output; feeds: a JSON file {"feeds": {NAME: {"type", "dims",
// "data"}}, "labels": [...]} of the graph's named inputs, one sigmoid
// output). PREDICTIONS "-": none to compare (zdist's metrics are compared
// by the caller). Prints one JSON line: examples, the largest absolute
// difference, both accuracies (and for sparse and feeds, both ROC AUCs and
// the ONNX predictions' log loss).
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

// zdist's predictions (one per line), or null for "-".
function readPredictions(predPath, n) {
  if (predPath === '-') return null;
  const want = fs.readFileSync(predPath, 'utf8').trim().split('\n').map(Number);
  if (want.length !== n) throw new Error(`${predPath}: ${want.length} lines, ${n} examples`);
  return want;
}

// One sigmoid output per example against the labels (and zdist's predictions).
function binaryReport(session, got, labels, want) {
  let maxDiff = 0, cOnnx = 0, cZdist = 0, logLoss = 0;
  got.forEach((g, i) => {
    if (want) maxDiff = Math.max(maxDiff, Math.abs(g - want[i]));
    cOnnx += (g > 0.5 ? 1 : 0) === labels[i];
    if (want) cZdist += (want[i] > 0.5 ? 1 : 0) === labels[i];
    const p = Math.min(Math.max(g, 1e-7), 1 - 1e-7);
    logLoss -= labels[i] ? Math.log(p) : Math.log(1 - p);
  });
  const n = labels.length;
  const r = {examples: n, outputs: 1, input: session.inputNames.join(','), output: session.outputNames[0],
             max_abs_diff: maxDiff, accuracy_onnx: cOnnx / n, auc_onnx: auc(got, labels), log_loss_onnx: logLoss / n};
  if (want) Object.assign(r, {accuracy_zdist: cZdist / n, auc_zdist: auc(want, labels)});
  else Object.assign(r, {accuracy_zdist: r.accuracy_onnx, auc_zdist: r.auc_onnx});
  return r;
}

async function sparse(model, svmPath, predPath) {
  const rows = readSvm(svmPath);
  const want = readPredictions(predPath, rows.length);
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
  const r = binaryReport(session, got, rows.map(r => r.label), want);
  // An id the table never held (a dynamic table: the default row) and an
  // empty example, for the caller to compare with its own reference.
  const one = async (id, v) => (await session.run({ids: new ort.Tensor('int64', BigInt64Array.from([id]), [1, 1]),
                                                   values: new ort.Tensor('float32', Float32Array.from([v]), [1, 1])}))[session.outputNames[0]].data[0];
  r.unseen_id = await one(4611686018427387903n, 1);
  r.empty = await one(0n, 0);
  console.log(JSON.stringify(r));
}

async function feeds(model, feedsPath, predPath) {
  const f = JSON.parse(fs.readFileSync(feedsPath, 'utf8'));
  const session = await ort.InferenceSession.create(model);
  const inputs = {};
  for (const [name, t] of Object.entries(f.feeds))
    inputs[name] = new ort.Tensor(t.type, t.type === 'int64' ? BigInt64Array.from(t.data.map(BigInt))
                                                             : Float32Array.from(t.data), t.dims);
  const out = await session.run(inputs);
  const got = Array.from(out[session.outputNames[0]].data);
  console.log(JSON.stringify(binaryReport(session, got, f.labels, readPredictions(predPath, f.labels.length))));
}

async function main() {
  const [model, imagesPath, labelsPath, predPath, shapeArg, link] = process.argv.slice(2);
  if (shapeArg === 'sparse') return sparse(model, imagesPath, predPath);
  if (shapeArg === 'feeds') return feeds(model, imagesPath, predPath);
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
