package io.wazoo.recipes;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A minimal JSON reader and writer (RFC 8259) for recipe arguments and
 * results; the JDK has none.
 *
 * <p>Values are plain Java objects: {@code null}, {@link Boolean},
 * {@link String}, {@link Long} (an integer that fits), {@link BigInteger}
 * (one that does not), {@link Double} (a number with a fraction or an
 * exponent), {@code List<Object>} and {@code Map<String, Object>} (field
 * order kept). The writer also takes other {@link Number}s, arrays of
 * objects, any {@link Collection} and {@link Map} with string keys, and
 * {@code byte[]}, written as an array of numbers 0-255 (the recipes take
 * binary arguments as such an array, or as a UTF-8 string).
 */
public final class Json {
    /** Nesting deeper than this is refused (no stack overflow on hostile input). */
    static final int MAX_DEPTH = 512;

    private Json() {}

    /** Parses one JSON value; anything but whitespace after it is an error. */
    public static Object parse(String text) {
        Reader r = new Reader(text);
        r.skipSpace();
        Object v = r.value(0);
        r.skipSpace();
        if (r.pos != text.length()) throw r.error("unexpected text after the value");
        return v;
    }

    /** {@link #parse} of UTF-8 bytes (malformed UTF-8 is an error). */
    public static Object parse(byte[] utf8) {
        try {
            String s = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(utf8)).toString();
            return parse(s);
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException("JSON: not UTF-8", e);
        }
    }

    /** The JSON text of {@code value}. */
    public static String write(Object value) {
        StringBuilder out = new StringBuilder();
        write(out, value, 0);
        return out.toString();
    }

    /**
     * A JSON object of alternating field names and values, e.g.
     * {@code Json.object("path", "/locks/x", "id", "me")}; a {@code null}
     * value leaves its field out (the recipes' optional arguments).
     */
    public static String object(Object... namesAndValues) {
        if (namesAndValues.length % 2 != 0) throw new IllegalArgumentException("names and values come in pairs");
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < namesAndValues.length; i += 2) {
            if (!(namesAndValues[i] instanceof String)) throw new IllegalArgumentException("field names are strings");
            if (namesAndValues[i + 1] != null) m.put((String) namesAndValues[i], namesAndValues[i + 1]);
        }
        return write(m);
    }

    private static void write(StringBuilder out, Object v, int depth) {
        if (depth > MAX_DEPTH) throw new IllegalArgumentException("JSON: nested too deep");
        if (v == null) {
            out.append("null");
        } else if (v instanceof Boolean) {
            out.append(((Boolean) v) ? "true" : "false");
        } else if (v instanceof String) {
            quote(out, (String) v);
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) throw new IllegalArgumentException("JSON has no " + d);
            if (d == Math.rint(d) && Math.abs(d) < 1e15) out.append((long) d);
            else out.append(Double.toString(d));
        } else if (v instanceof BigDecimal) {
            out.append(((BigDecimal) v).toString());
        } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte
                || v instanceof BigInteger) {
            out.append(v.toString());
        } else if (v instanceof Number) {
            throw new IllegalArgumentException("JSON: unsupported number type " + v.getClass().getName());
        } else if (v instanceof byte[]) {
            byte[] b = (byte[]) v;
            out.append('[');
            for (int i = 0; i < b.length; i++) {
                if (i > 0) out.append(',');
                out.append(b[i] & 0xff);
            }
            out.append(']');
        } else if (v instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!(e.getKey() instanceof String)) throw new IllegalArgumentException("JSON: object keys are strings");
                if (!first) out.append(',');
                first = false;
                quote(out, (String) e.getKey());
                out.append(':');
                write(out, e.getValue(), depth + 1);
            }
            out.append('}');
        } else if (v instanceof Collection || v instanceof Object[]) {
            Iterable<?> items = v instanceof Object[] ? List.of((Object[]) v) : (Collection<?>) v;
            out.append('[');
            boolean first = true;
            for (Object item : items) {
                if (!first) out.append(',');
                first = false;
                write(out, item, depth + 1);
            }
            out.append(']');
        } else {
            throw new IllegalArgumentException("JSON: cannot write a " + v.getClass().getName());
        }
    }

    private static void quote(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                case '\b': out.append("\\b"); break;
                case '\f': out.append("\\f"); break;
                default:
                    if (Character.isHighSurrogate(c) && i + 1 < s.length()
                            && Character.isLowSurrogate(s.charAt(i + 1))) {
                        out.append(c).append(s.charAt(++i)); // a pair: one code point
                    } else if (c < 0x20 || Character.isSurrogate(c)) {
                        // Control characters must be escaped; so is a lone
                        // surrogate, which has no UTF-8 form.
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }

    private static final class Reader {
        final String s;
        int pos;

        Reader(String s) {
            this.s = s;
        }

        IllegalArgumentException error(String what) {
            return new IllegalArgumentException("JSON: " + what + " at offset " + pos);
        }

        void skipSpace() {
            while (pos < s.length()) {
                char c = s.charAt(pos);
                if (c == ' ' || c == '\t' || c == '\n' || c == '\r') pos++;
                else break;
            }
        }

        Object value(int depth) {
            if (depth > MAX_DEPTH) throw error("nested too deep");
            if (pos >= s.length()) throw error("a value expected");
            char c = s.charAt(pos);
            switch (c) {
                case '{': return object(depth);
                case '[': return array(depth);
                case '"': return string();
                case 't': return literal("true", Boolean.TRUE);
                case 'f': return literal("false", Boolean.FALSE);
                case 'n': return literal("null", null);
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) return number();
                    throw error("unexpected character '" + c + "'");
            }
        }

        Object literal(String word, Object v) {
            if (!s.startsWith(word, pos)) throw error("unexpected text");
            pos += word.length();
            return v;
        }

        Map<String, Object> object(int depth) {
            Map<String, Object> m = new LinkedHashMap<>();
            pos++; // '{'
            skipSpace();
            if (peek() == '}') {
                pos++;
                return m;
            }
            while (true) {
                skipSpace();
                if (peek() != '"') throw error("a field name expected");
                String key = string();
                skipSpace();
                if (peek() != ':') throw error("':' expected");
                pos++;
                skipSpace();
                if (m.containsKey(key)) throw error("duplicate field \"" + key + "\"");
                m.put(key, value(depth + 1));
                skipSpace();
                char c = peek();
                pos++;
                if (c == '}') return m;
                if (c != ',') {
                    pos--;
                    throw error("',' or '}' expected");
                }
            }
        }

        List<Object> array(int depth) {
            List<Object> l = new ArrayList<>();
            pos++; // '['
            skipSpace();
            if (peek() == ']') {
                pos++;
                return l;
            }
            while (true) {
                skipSpace();
                l.add(value(depth + 1));
                skipSpace();
                char c = peek();
                pos++;
                if (c == ']') return l;
                if (c != ',') {
                    pos--;
                    throw error("',' or ']' expected");
                }
            }
        }

        char peek() {
            return pos < s.length() ? s.charAt(pos) : '\0';
        }

        String string() {
            pos++; // '"'
            StringBuilder b = new StringBuilder();
            while (true) {
                if (pos >= s.length()) throw error("unterminated string");
                char c = s.charAt(pos++);
                if (c == '"') return b.toString();
                if (c < 0x20) {
                    pos--;
                    throw error("unescaped control character in a string");
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                if (pos >= s.length()) throw error("unterminated escape");
                char e = s.charAt(pos++);
                switch (e) {
                    case '"': b.append('"'); break;
                    case '\\': b.append('\\'); break;
                    case '/': b.append('/'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'n': b.append('\n'); break;
                    case 'r': b.append('\r'); break;
                    case 't': b.append('\t'); break;
                    case 'u':
                        if (pos + 4 > s.length()) throw error("short \\u escape");
                        int code = 0;
                        for (int i = 0; i < 4; i++) {
                            int d = Character.digit(s.charAt(pos + i), 16);
                            if (d < 0) throw error("bad \\u escape");
                            code = code * 16 + d;
                        }
                        pos += 4;
                        b.append((char) code); // surrogate pairs join up as two chars
                        break;
                    default:
                        pos--;
                        throw error("bad escape '\\" + e + "'");
                }
            }
        }

        Object number() {
            int start = pos;
            if (peek() == '-') pos++;
            if (peek() == '0') {
                pos++;
            } else if (peek() >= '1' && peek() <= '9') {
                while (peek() >= '0' && peek() <= '9') pos++;
            } else {
                throw error("a digit expected");
            }
            boolean integral = true;
            if (peek() == '.') {
                integral = false;
                pos++;
                if (!(peek() >= '0' && peek() <= '9')) throw error("a digit expected after '.'");
                while (peek() >= '0' && peek() <= '9') pos++;
            }
            if (peek() == 'e' || peek() == 'E') {
                integral = false;
                pos++;
                if (peek() == '+' || peek() == '-') pos++;
                if (!(peek() >= '0' && peek() <= '9')) throw error("a digit expected in the exponent");
                while (peek() >= '0' && peek() <= '9') pos++;
            }
            String text = s.substring(start, pos);
            if (!integral) return Double.parseDouble(text);
            BigInteger big = new BigInteger(text);
            return big.bitLength() < 64 ? (Object) big.longValue() : big;
        }
    }
}
