// Writes TFRecord files of tf.train.Examples with npm's @roboflow/tfrecords
// (a writer this project did not write), and prints each row as
// tfrecord_driver prints it: int64s in decimal, floats as "f" + their IEEE
// bits in hex, var features in brackets. Usage: node tfrecord_writer.js DIR ROWS
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const { TFRecordsBuilder, FeatureType } = require('@roboflow/tfrecords');

const [dir, rowsArg] = process.argv.slice(2);
const rows = Number(rowsArg);
let seed = 12345;
function rand() { // a fixed LCG, so the files are the same on every run
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}
function bits(x) {
  const b = Buffer.alloc(4);
  b.writeFloatLE(x);
  return 'f' + b.readUInt32LE().toString(16).padStart(8, '0');
}
const records = [];
const expect = [];
for (let i = 0; i < rows; i++) {
  const b = new TFRecordsBuilder();
  const label = i % 2;
  // float32 values exactly (this protobuf library's double-to-float
  // rounding differs from round-to-nearest in the last bit)
  const i1 = Math.fround(Math.log1p(Math.floor(rand() * 1000)));
  // ids across the range JavaScript numbers hold exactly, negative ones too
  const c1 = Math.floor((rand() - 0.5) * 2 * Number.MAX_SAFE_INTEGER);
  const ntags = Math.floor(rand() * 4);
  const tags = [];
  for (let k = 0; k < ntags; k++) tags.push(Math.floor(rand() * 100000) - 50000);
  const dense = [Math.fround(rand()), Math.fround(rand()), Math.fround(rand())];
  b.addFeature('label', FeatureType.Int64, label);
  b.addFeature('name', FeatureType.String, 'row ' + i); // not in the spec: skipped
  b.addFeature('I1', FeatureType.Float, i1);
  b.addFeature('C1', FeatureType.Int64, c1);
  b.addArrayFeature('dense', FeatureType.Float, dense);
  if (ntags > 0) b.addArrayFeature('tags', FeatureType.Int64, tags);
  if (i % 5 !== 0) b.addFeature('I2', FeatureType.Float, i); // missing every 5th: the default
  records.push(b.build());
  const i2 = i % 5 !== 0 ? i : -1;
  expect.push([label, bits(i1), c1, dense.map(bits).join(','), '[' + tags.join(',') + ']', bits(i2)].join(' '));
}
const half = Math.floor(rows / 2);
fs.writeFileSync(path.join(dir, 'part-0.tfrecord'), TFRecordsBuilder.buildTFRecords(records.slice(0, half)));
fs.writeFileSync(path.join(dir, 'part-1.tfrecord'), TFRecordsBuilder.buildTFRecords(records.slice(half)));
fs.writeFileSync(path.join(dir, 'all.tfrecord.gz'), zlib.gzipSync(TFRecordsBuilder.buildTFRecords(records)));
process.stdout.write(expect.join('\n') + '\n');
