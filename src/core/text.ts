// Text from untrusted producers (an untrained policy's bytes, a sandbox's output) shown on a
// terminal or in a log: control characters are written out as escapes, so ESC sequences cannot
// move the cursor, recolour, retitle the window or hide the lines around them.

/** C0 controls but tab and newline, DEL, and the C1 controls (U+0080–U+009F, e.g. CSI U+009B). */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** `text` with control characters (other than \n and \t) replaced by `\xHH` escapes (`\r` as `\r`). */
export function escapeControlChars(text: string): string {
  return text.replace(CONTROL, (c) => {
    if (c === '\r') return '\\r';
    return `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
}
