'use strict';
// A strict RFC 8259 JSON parser that keeps number literals exactly.
// parse(text) -> { value, canon } where `value` is a plain JS value (numbers as doubles,
// used for schema validation) and `canon` is a minified JSON text of the same document
// whose number literals are the ones the stream sent (so a 30-digit integer reaches the
// executor exactly, which JSON.parse + JSON.stringify would not do).
// Throws ParseError (never with input text in its message).

class ParseError extends Error {}

function parse(text) {
  let i = 0;
  const n = text.length;
  const fail = (why) => {
    throw new ParseError(`${why} at offset ${i}`);
  };
  const ws = () => {
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };
  const hex = (c) =>
    (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);

  function str() {
    // at '"'
    i++;
    let out = '';
    let start = i;
    for (;;) {
      if (i >= n) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(start, i);
        i++;
        return out;
      }
      if (c < 0x20) fail('control character in string');
      if (c === 0x5c) {
        out += text.slice(start, i);
        i++;
        if (i >= n) fail('unterminated escape');
        const e = text[i];
        switch (e) {
          case '"': out += '"'; i++; break;
          case '\\': out += '\\'; i++; break;
          case '/': out += '/'; i++; break;
          case 'b': out += '\b'; i++; break;
          case 'f': out += '\f'; i++; break;
          case 'n': out += '\n'; i++; break;
          case 'r': out += '\r'; i++; break;
          case 't': out += '\t'; i++; break;
          case 'u': {
            for (let k = 1; k <= 4; k++) {
              if (i + k >= n || !hex(text.charCodeAt(i + k))) fail('bad unicode escape');
            }
            out += String.fromCharCode(parseInt(text.slice(i + 1, i + 5), 16));
            i += 5;
            break;
          }
          default:
            fail('bad escape');
        }
        start = i;
        continue;
      }
      i++;
    }
  }

  const NUM = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

  function value(depth) {
    if (depth > 5000) fail('nested too deeply');
    ws();
    if (i >= n) fail('unexpected end');
    const c = text[i];
    if (c === '{') {
      i++;
      const obj = {};
      const canon = new Map();
      ws();
      if (text[i] === '}') {
        i++;
        return { value: obj, canon: '{}' };
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a key');
        const k = str();
        ws();
        if (text[i] !== ':') fail('expected a colon');
        i++;
        const v = value(depth + 1);
        Object.defineProperty(obj, k, { value: v.value, enumerable: true, writable: true, configurable: true });
        canon.set(k, v.canon);
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === '}') { i++; break; }
        fail('expected , or }');
      }
      const parts = [];
      for (const [k, v] of canon) parts.push(JSON.stringify(k) + ':' + v);
      return { value: obj, canon: '{' + parts.join(',') + '}' };
    }
    if (c === '[') {
      i++;
      const arr = [];
      const parts = [];
      ws();
      if (text[i] === ']') {
        i++;
        return { value: arr, canon: '[]' };
      }
      for (;;) {
        const v = value(depth + 1);
        arr.push(v.value);
        parts.push(v.canon);
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === ']') { i++; break; }
        fail('expected , or ]');
      }
      return { value: arr, canon: '[' + parts.join(',') + ']' };
    }
    if (c === '"') {
      const s = str();
      return { value: s, canon: JSON.stringify(s) };
    }
    if (text.startsWith('true', i)) { i += 4; return { value: true, canon: 'true' }; }
    if (text.startsWith('false', i)) { i += 5; return { value: false, canon: 'false' }; }
    if (text.startsWith('null', i)) { i += 4; return { value: null, canon: 'null' }; }
    NUM.lastIndex = i;
    const m = NUM.exec(text);
    if (m && m[0].length > 0 && m[0] !== '-') {
      i += m[0].length;
      return { value: Number(m[0]), canon: m[0] };
    }
    fail('unexpected character');
  }

  const v = value(0);
  ws();
  if (i !== n) fail('trailing data');
  return v;
}

module.exports = { parse, ParseError };
