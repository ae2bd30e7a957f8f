#!/usr/bin/env node
// The Node peer of tests/websocket/interop_test.cc: the npm package `ws` (scripts/install-deps.sh
// installs the pinned version under /opt/lionet-test/node; the test sets NODE_PATH).
//
//   node ws_peer.js client URL echo|server-close [--no-compression]
//
// Runs the scenario against a LioNet server, printing "EXT <extensions agreed>" and one
// "OK <step>" per check that held; the first failed check prints "FAIL <step>" and exits 1.
// Every wait is bounded: the whole run by 60 s, each step by the timer below.
'use strict';
const WebSocket = require('ws');

const args = process.argv.slice(2);
const compression = !args.includes('--no-compression');
const [mode, url, scenario] = args.filter((a) => a !== '--no-compression');
if (mode !== 'client') {
  console.log('FAIL usage: client URL SCENARIO [--no-compression]');
  process.exit(2);
}
setTimeout(() => fail('the scenario did not end within 60 s'), 60000).unref();

function fail(what) {
  console.log('FAIL ' + what);
  process.exit(1);
}
function ok(what) {
  console.log('OK ' + what);
}

const ws = new WebSocket(url, { perMessageDeflate: compression, maxPayload: 64 << 20 });
const inbox = [];
let waiter = null;
ws.on('message', (data, isBinary) => {
  inbox.push({ data, isBinary });
  if (waiter) waiter();
});
ws.on('error', (e) => fail('error: ' + e.message));

function next() {
  return new Promise((resolve) => {
    const take = () => {
      if (inbox.length) {
        waiter = null;
        resolve(inbox.shift());
      }
    };
    waiter = take;
    take();
  });
}
function closed() {
  return new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
}

async function echo() {
  const text = 'héllo wörld ' + 'ü'.repeat(1000);
  ws.send(text);
  let m = await next();
  if (m.isBinary || m.data.toString() !== text) fail('text echo');
  ok('text echo');
  const bin = Buffer.from([0, 1, 0xfe, 0xff]);
  ws.send(bin);
  m = await next();
  if (!m.isBinary || !m.data.equals(bin)) fail('binary echo');
  ok('binary echo');
  ws.send('');
  m = await next();
  if (m.isBinary || m.data.length !== 0) fail('empty text echo');
  ok('empty text echo');
  // Fragments: a text message in three frames.
  ws.send('frag', { fin: false });
  ws.send('mented ', { fin: false });
  ws.send('täxt', { fin: true });
  m = await next();
  if (m.data.toString() !== 'fragmented täxt') fail('fragmented text echo');
  ok('fragmented text echo');
  const big = Buffer.alloc(1 << 20);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 10)) & 0xff;
  ws.send(big);
  m = await next();
  if (!m.isBinary || !m.data.equals(big)) fail('1 MiB binary echo');
  ok('1 MiB binary echo');
  await new Promise((resolve) => {
    ws.once('pong', (p) => {
      if (p.toString() !== 'are you there') fail('pong payload');
      resolve();
    });
    ws.ping('are you there');
  });
  ok('ping answered by a pong');
  const end = closed();
  ws.close(4001, 'node bye');
  const c = await end;
  console.log('CLOSED ' + c.code + ' ' + c.reason);
}

async function serverClose() {
  const end = closed();
  ws.send('close please');
  const c = await end;
  console.log('CLOSED ' + c.code + ' ' + c.reason);
}

ws.on('open', async () => {
  console.log('EXT ' + (ws.extensions || 'none'));
  if (scenario === 'echo') await echo();
  else if (scenario === 'server-close') await serverClose();
  else fail('unknown scenario ' + scenario);
  process.exit(0);
});
