#!/usr/bin/env python3
# tests/fuzz/http-fuzz.py --- mutate real requests, send them to plucky over sockets, check every answer
#
# Copyright (C) 2026 the plucky authors
# SPDX-License-Identifier: LGPL-3.0-or-later
#
# Commentary:
#
# The seeds are the 343 real request heads of tests/data/requests/ (each
# given a body of the size its Content-Length or Transfer-Encoding says)
# and the framing cases of tests/server/framing.scm.  Each input is a seed,
# mutated (byte flips, insertions of CR/LF/NUL/SP/":" and very long runs,
# deletions, duplicated, dropped and swapped lines, two requests spliced,
# random Content-Length and Transfer-Encoding values, chunked bodies with
# bad sizes, extensions and trailers, truncation, other methods, targets,
# versions, Hosts and line ends), or a framing case as it is.  A
# connection carries 1 to 20 inputs back to back (pipelined): unmutated
# requests first, then one mutant, so that the server reads every input
# sent (a refusal closes the connection: whatever followed it would never
# be parsed); one connection in ten carries unmutated requests only.  The
# bytes are written whole, split into random-sized writes, or paced over
# up to a few seconds; most connections then shut down their writing
# side, the others wait for the server's timeouts to end them.
#
# What is checked, on every connection:
#   - every byte that comes back parses as HTTP/1.x responses: a status
#     line, header lines (tokens, no bare CR, LF or NUL), and a body framed
#     by Content-Length or chunked (none for 1xx, 204, 304, or an answer
#     whose X-Method is HEAD: tests/fuzz/app.scm says which method it saw;
#     nor for a refusal of which only the head came before the close: the
#     refusal of a HEAD request); a response cut short by the close is a
#     violation;
#   - after "Connection: close" or a refusal (4xx, 5xx) nothing more comes,
#     and the server closes: nothing of a refused request is served;
#   - the unmutated requests at the head of each connection get exactly
#     the answers expected, in order: 200, the method and the body length
#     of each, however the bytes were split (the differential oracle; the
#     corpus requests the server does not answer 200 alone are left out);
#   - no hang: every connection ends, closed by the server, within
#     --hang-seconds of the last byte that moved either way;
#   - the server process is alive after every batch (--check-every inputs)
#     and answers a control request; its RSS (VmRSS) is read before the
#     campaign, at each check, and after.
#
# A connection that breaks a rule has its bytes, the way they were split
# and what came back saved under --save-dir, to replay by hand.
#
# Usage:
#   tests/fuzz/http-fuzz.py --serve --inputs 20000        # start plucky itself
#   tests/fuzz/http-fuzz.py --serve --app tests/fuzz/port-app.scm   # bodies read as ports
#   tests/fuzz/http-fuzz.py --port P --pid PID ...        # a server already running
# The last line printed is a JSON summary; --results FILE appends a
# Markdown report (--report-from SUMMARY makes it again from a summary).
# Exit status 0 when nothing broke a rule.
#
# Code:

import argparse
import collections
import errno
import json
import os
import random
import re
import selectors
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

###
### Seeds
###

def load_corpus(directory):
    """-> list of (name, head bytes) of every *.http file."""
    seeds = []
    for name in sorted(os.listdir(directory)):
        if name.endswith('.http'):
            with open(os.path.join(directory, name), 'rb') as f:
                seeds.append((name, f.read()))
    return seeds

def post(path, *lines):
    return ('POST %s HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n' % (path, '\r\n'.join(lines))).encode('latin-1')

# The raw cases of tests/server/framing.scm, byte for byte.
FRAMING_CASES = [
    post('/', 'Content-Length: 5', 'Transfer-Encoding: chunked') + b'5\r\nhello\r\n0\r\n\r\n',
    post('/', 'Content-Length: 5', 'Content-Length: 6') + b'hello!',
    post('/', 'Content-Length: +5') + b'hello',
    post('/', 'Content-Length: 5a') + b'hello',
    post('/', 'Transfer-Encoding: gzip') + b'hello',
    post('/', 'Transfer-Encoding: chunked, gzip') + b'hello',
    b'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
    post('/', 'Transfer-Encoding: chunked') + b'5x\r\nhello\r\n0\r\n\r\n',
    post('/', 'Transfer-Encoding: chunked') + b'5\nhello\r\n0\r\n\r\n',
    post('/', 'Transfer-Encoding: chunked') + b'3\r\nhello\r\n0\r\n\r\n',
    post('/', 'Transfer-Encoding: chunked') + b'5;a\x01b\r\nhello\r\n0\r\n\r\n',
    post('/', 'Content-Length: 5', 'Expect: teapot') + b'hello',
    post('/a', 'Content-Length: 4', 'Transfer-Encoding: chunked')
        + b'0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n',
    post('/c', 'Transfer-Encoding: chunked', 'Connection: close')
        + b'5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n',
    post('/one', 'Transfer-Encoding: chunked') + b'3\r\nabc\r\n0\r\n\r\n'
        + post('/two', 'Content-Length: 2') + b'xy'
        + b'GET /three HTTP/1.1\r\nHost: localhost\r\n\r\n',
    post('/', 'Transfer-Encoding: chunked') + b'6\r\nhello!\r\n6\r\nhello!\r\n0\r\n\r\n',
    post('/e', 'Content-Length: 5', 'Expect: 100-continue') + b'hello',
    post('/big', 'Content-Length: 1000', 'Expect: 100-continue'),
]

###
### A request, as far as the fuzzer needs to know it
###

class Input:
    """One input: its bytes and, for an unmutated request, what the server
    must answer (method, body length, and whether it closes)."""
    __slots__ = ('data', 'valid', 'method', 'body_length', 'closes', 'origin')

    def __init__(self, data, valid, method=None, body_length=0, closes=False, origin=''):
        self.data = data
        self.valid = valid
        self.method = method
        self.body_length = body_length
        self.closes = closes
        self.origin = origin

def split_head(data):
    """-> (head lines without the blank line, index of the body) or None."""
    end = data.find(b'\r\n\r\n')
    if end < 0:
        return None
    return data[:end].split(b'\r\n'), end + 4

def header_values(lines, name):
    name = name.lower().encode('latin-1')
    values = []
    for line in lines[1:]:
        k, sep, v = line.partition(b':')
        if sep and k.strip().lower() == name:
            values.append(v.strip())
    return values

def chunked_body(r, total):
    """A valid chunked encoding of TOTAL random bytes, with an extension and
    a trailer now and then."""
    out = bytearray()
    left = total
    while left > 0:
        n = min(left, r.choice([1, 2, 7, 16, 100, 1000, 4096]))
        ext = b';x=1' if r.random() < 0.1 else b''
        out += b'%x%s\r\n' % (n, ext) + random_bytes(r, n) + b'\r\n'
        left -= n
    out += b'0\r\n'
    if r.random() < 0.2:
        out += b'X-Trailer: t\r\n'
    out += b'\r\n'
    return bytes(out)

def random_bytes(r, n):
    block = bytes(r.getrandbits(8) for _ in range(min(n, 256)))
    return (block * (n // len(block) + 1))[:n] if n else b''

def with_body(r, head, origin):
    """Give a corpus head the body it announces.  -> Input (valid)."""
    parts = split_head(head)
    lines, index = parts
    request_line = lines[0].split(b' ')
    method = request_line[0].decode('latin-1')
    version = request_line[-1]
    connection = b','.join(header_values(lines, 'connection')).lower()
    tokens = [t.strip() for t in connection.split(b',')]
    closes = (b'close' in tokens) or (version == b'HTTP/1.0' and b'keep-alive' not in tokens)
    te = header_values(lines, 'transfer-encoding')
    cl = header_values(lines, 'content-length')
    if te:
        n = r.choice([0, 1, 5, 100, 3000])
        data = head[:index] + chunked_body(r, n)
    elif cl:
        n = int(cl[0])
        data = head[:index] + random_bytes(r, n)
    else:
        n = 0
        data = head[:index]
    return Input(data, True, method, n, closes, origin)

###
### Mutations
###

SPECIAL = [b'\r', b'\n', b'\r\n', b'\x00', b' ', b'\t', b':', b'\r\n\r\n', b'\n\n', b'\x7f',
           b'\xff', b'\x80', b'%', b'%00', b'"', b';', b',', b'=', b'\r\n ', b'\r\n\t',
           b'0\r\n\r\n', b'/', b'?', b'#', b'@', b'[', b'\\', b'HTTP/1.1', b'\r\r\n', b'\x0b',
           b'\x0c', b'\x1b', b'\xc0\x80', b'GET / HTTP/1.1\r\nHost: x\r\n\r\n']
RUN_BYTES = [b'A', b' ', b'\t', b'0', b'9', b':', b'/', b'%', b'\xff', b'\r\n', b'X: y\r\n',
             b',', b'\x00', b'a=b;', b'f', b'\n']
RUN_LENGTHS = [2, 16, 100, 255, 256, 1023, 1024, 4095, 4096, 8190, 8191, 8192, 8193, 16384,
               32766, 32767, 32768, 32769, 65535, 65536, 100000]
CONTENT_LENGTHS = [b'0', b'1', b'-1', b'+1', b' 1', b'1 ', b'01', b'00000000000000000000005',
                   b'1.0', b'1e3', b'0x10', b'', b'18446744073709551615', b'18446744073709551616',
                   b'99999999999999999999999999999999', b'4294967296', b'2147483648',
                   b'1048576', b'1048577', b'67108864', b'67108865', b'1,1', b'1, 2', b'5, 5',
                   b'1,,1', b' , ', b',', b'\xd9\xa1', b'1\x00', b'\t7', b'3 3', b'-0']
TRANSFER_ENCODINGS = [b'chunked', b'Chunked', b'CHUNKED', b'gzip, chunked', b'chunked, gzip',
                      b'chunked, chunked', b'identity', b'', b' chunked', b'chunked ',
                      b'chunked;q=1', b'x-chunked', b'chunked\x00', b'gzip', b'deflate,chunked',
                      b'chunk', b'chunked,', b',chunked', b'\tchunked', b'identity, chunked',
                      b'chunked\r\n Transfer-Encoding: gzip']
METHODS = [b'get', b'G ET', b'', b'GET\x00', b'PRI', b'CONNECT', b'HEAD', b'OPTIONS', b'\xffGET',
           b'GET GET', b'POST', b'TRACE', b'M-SEARCH', b'A' * 100, b'A' * 9000, b'G\tET', b'(GET)',
           b'GET:', b'DELETE']
VERSIONS = [b'HTTP/1.0', b'HTTP/1.1', b'HTTP/2.0', b'HTTP/0.9', b'HTTP/1.2', b'HTTP/1',
            b'HTTP/1.10', b'http/1.1', b'HTTP/1.1 ', b'HTTP /1.1', b'HTTP/11', b'', b'HTTP/9.9',
            b'HTTP/1.1\x00', b'HTTP/A.B', b'HTTP/1.1 HTTP/1.1', b'HTTP/3']
TARGETS = [b'*', b'/', b'//', b'/%00', b'/%zz', b'/a b', b'http://example.org/',
           b'http://[::1]:80/', b'example.org:443', b'/' + b'a' * 8200, b'?', b'#frag', b'/\xff',
           b'/a\tb', b'https://user@host/', b'', b'../../etc/passwd', b'/a?b=c&d', b'http://',
           b'HTTP://X/', b'/%', b'/\x00', b'http://example.org:99999/', b'[::1]:80',
           b'/a?' + b'x=' * 3000, b'http://a b/']
HOSTS = [b'', b'a b', b'x:99999', b'x:', b'[::1]', b'[::1', b'a@b', b'x:80:80', b'\xff', b'x,y',
         b'localhost:0', b'-', b'a' * 300, b'x:-1', b'x:08', b'\x00', b'[v1.x]', b'x/y']
CHUNK_SIZES = [b'ffffffffffffffffffff', b'-1', b'0x5', b'g', b'', b'1' * 300, b'+5',
               b'7fffffffffffffff', b'10000000000000000', b'ffffffff', b'FFFFFFF']

def head_bounds(data):
    end = data.find(b'\r\n\r\n')
    return (end + 4) if end >= 0 else len(data)

def pos(r, data, head_only=False):
    limit = head_bounds(data) if head_only else len(data)
    return r.randrange(limit + 1)

def m_flip(r, d, seeds):
    if not d:
        return d
    i = r.randrange(len(d))
    d[i] ^= 1 << r.randrange(8)
    return d

def m_set_byte(r, d, seeds):
    if not d:
        return d
    i = r.randrange(len(d))
    d[i] = r.choice([0, 9, 10, 13, 32, 34, 37, 44, 47, 58, 59, 61, 127, 128, 255, r.randrange(256)])
    return d

def m_insert(r, d, seeds):
    i = pos(r, d, head_only=r.random() < 0.8)
    d[i:i] = r.choice(SPECIAL)
    return d

def m_long_run(r, d, seeds):
    i = pos(r, d, head_only=r.random() < 0.8)
    unit = r.choice(RUN_BYTES)
    n = r.choice(RUN_LENGTHS) // len(unit) + 1
    d[i:i] = unit * n
    return d

def m_delete(r, d, seeds):
    if not d:
        return d
    i = r.randrange(len(d))
    n = r.choice([1, 1, 2, 4, 16, r.randrange(1, len(d) + 1)])
    del d[i:i + n]
    return d

def lines_op(d, f):
    # Apply F to the list of head lines (split at LF, each keeping its end).
    end = head_bounds(d)
    lines = bytes(d[:end]).splitlines(keepends=True)
    if len(lines) < 2:
        return d
    lines = f(lines)
    d[:end] = b''.join(lines)
    return d

def m_dup_line(r, d, seeds):
    def f(lines):
        i = r.randrange(len(lines))
        lines.insert(i, lines[i] * r.choice([1, 1, 2, 150]))
        return lines
    return lines_op(d, f)

def m_drop_line(r, d, seeds):
    def f(lines):
        del lines[r.randrange(len(lines))]
        return lines
    return lines_op(d, f)

def m_swap_lines(r, d, seeds):
    def f(lines):
        i, j = r.randrange(len(lines)), r.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return lines
    return lines_op(d, f)

def m_splice(r, d, seeds):
    other = r.choice(seeds)
    i = r.randrange(len(d) + 1)
    j = r.randrange(len(other) + 1)
    return bytearray(d[:i] + other[j:])

def m_truncate(r, d, seeds):
    if not d:
        return d
    return d[:r.randrange(len(d))]

def set_header(r, d, name, value, replace=True):
    end = head_bounds(d)
    lines = bytes(d[:end]).split(b'\r\n')
    if replace:
        lines = [l for l in lines if not l.lower().startswith(name.lower() + b':')] or lines
    spelling = r.choice([name, name.lower(), name.upper(), name + b' ', name + b'\t'])
    sep = r.choice([b': ', b':', b':\t', b':  ', b': '])
    at = r.randrange(1, max(2, len(lines) - 1)) if len(lines) > 2 else len(lines)
    lines.insert(at, spelling + sep + value)
    d[:end] = b'\r\n'.join(lines)
    return d

def m_content_length(r, d, seeds):
    value = r.choice(CONTENT_LENGTHS + [str(r.randrange(0, 100000)).encode()])
    d = set_header(r, d, b'Content-Length', value, replace=r.random() < 0.7)
    if r.random() < 0.5:
        d += random_bytes(r, r.choice([0, 1, 5, 100, 1000, 70000]))
    return d

def m_transfer_encoding(r, d, seeds):
    d = set_header(r, d, b'Transfer-Encoding', r.choice(TRANSFER_ENCODINGS),
                   replace=r.random() < 0.7)
    if r.random() < 0.7:
        end = head_bounds(d)
        d[end:] = chunked_body(r, r.choice([0, 3, 50])) if r.random() < 0.5 else bad_chunked(r)
    return d

def bad_chunked(r):
    out = bytearray()
    for _ in range(r.randrange(0, 4)):
        n = r.choice([0, 1, 5, 16, 300])
        size = b'%x' % n
        size = r.choice([size, size.upper(), b'000' + size, size + b' ', b' ' + size,
                         size + b';', size + b';a', size + b';a=b', size + b';a="b c"',
                         size + b';\x01', size + b'\t;x', size + b';' + b'e' * 5000,
                         b'%x' % (n + 1), b'%x' % max(0, n - 1)] + CHUNK_SIZES)
        out += size + r.choice([b'\r\n', b'\r\n', b'\n', b'\r', b''])
        out += random_bytes(r, n) + r.choice([b'\r\n', b'\r\n', b'\n', b'', b'XX'])
    out += r.choice([b'0\r\n', b'0\r\n', b'0\n', b'', b'00\r\n', b'0;x\r\n'])
    out += r.choice([b'', b'X: y\r\n', b'X y\r\n', b'Content-Length: 5\r\n', b'X: ' + b'y' * 40000 + b'\r\n',
                     b'\x00\r\n', b'X: y\r\n' * 200])
    out += r.choice([b'\r\n', b'\r\n', b'', b'\n'])
    return bytes(out)

def m_chunked_body(r, d, seeds):
    d = set_header(r, d, b'Transfer-Encoding', b'chunked', replace=True)
    end = head_bounds(d)
    d[end:] = bad_chunked(r)
    return d

def request_line_op(d, f):
    end = d.find(b'\r\n')
    if end < 0:
        end = len(d)
    parts = bytes(d[:end]).split(b' ')
    parts = f(parts)
    d[:end] = b' '.join(parts)
    return d

def m_method(r, d, seeds):
    def f(parts):
        parts[0] = r.choice(METHODS)
        return parts
    return request_line_op(d, f)

def m_target(r, d, seeds):
    def f(parts):
        if len(parts) > 1:
            parts[1] = r.choice(TARGETS)
        return parts
    return request_line_op(d, f)

def m_version(r, d, seeds):
    def f(parts):
        parts[-1] = r.choice(VERSIONS)
        return parts
    return request_line_op(d, f)

def m_host(r, d, seeds):
    choice = r.random()
    if choice < 0.3:
        def f(lines):
            return [l for l in lines if not l.lower().startswith(b'host:')]
        return lines_op(d, f)
    return set_header(r, d, b'Host', r.choice(HOSTS), replace=choice < 0.7)

def m_line_ends(r, d, seeds):
    end = head_bounds(d)
    head = bytes(d[:end])
    how = r.randrange(4)
    if how == 0:
        head = head.replace(b'\r\n', b'\n')
    else:
        crlfs = [m.start() for m in re.finditer(b'\r\n', head)]
        if crlfs:
            i = r.choice(crlfs)
            head = head[:i] + [b'\r', b'\n\r', b'\r\r\n', b'\n'][how] + head[i + 2:]
    d[:end] = head
    return d

def m_fold(r, d, seeds):
    end = head_bounds(d)
    crlfs = [m.start() for m in re.finditer(b'\r\n', bytes(d[:end]))][1:-1]
    if crlfs:
        i = r.choice(crlfs)
        d[i:i] = r.choice([b'\r\n folded', b'\r\n\tfolded', b'\r\n ', b'\r\n'])
    return d

def m_space_before_colon(r, d, seeds):
    end = head_bounds(d)
    colons = [m.start() for m in re.finditer(b':', bytes(d[:end]))]
    if colons:
        i = r.choice(colons)
        d[i:i] = r.choice([b' ', b'\t', b'\x00'])
    return d

def m_twice(r, d, seeds):
    # The same request again, behind itself, within one input.
    return d + d

MUTATORS = [
    (m_flip, 6), (m_set_byte, 6), (m_insert, 8), (m_long_run, 3), (m_delete, 6),
    (m_dup_line, 4), (m_drop_line, 4), (m_swap_lines, 3), (m_splice, 4), (m_truncate, 5),
    (m_content_length, 8), (m_transfer_encoding, 7), (m_chunked_body, 6), (m_method, 3),
    (m_target, 3), (m_version, 3), (m_host, 3), (m_line_ends, 3), (m_fold, 2),
    (m_space_before_colon, 2), (m_twice, 1),
]
MUTATOR_TABLE = [f for f, w in MUTATORS for _ in range(w)]

def mutate(r, seed, seeds):
    d = bytearray(seed)
    for _ in range(1 + (r.random() < 0.4) + (r.random() < 0.15) + (r.random() < 0.05)):
        d = r.choice(MUTATOR_TABLE)(r, d, seeds)
    return bytes(d)

###
### Reading what comes back
###

STATUS_LINE = re.compile(rb'HTTP/1\.[01] ([1-5][0-9][0-9]) [\t\x20-\x7e\x80-\xff]*')
FIELD_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([\t\x20-\x7e\x80-\xff]*)")

class Violation(Exception):
    pass

class ResponseReader:
    """Parses the bytes a connection receives into responses, and raises
    Violation at the first byte that does not fit."""

    def __init__(self):
        self.buf = bytearray()
        self.responses = []          # final responses: (code, x-method, x-body-length)
        self.interim = 0             # 1xx responses
        self.must_close = None       # why nothing more may come, or None
        self.close_delimited = False
        # A refusal whose head has come and whose content has not begun:
        # (code, fields, length of its head), or None.  Refusals are
        # written before the server knows or trusts anything of the
        # request but, when it could parse it, its method: the answer to
        # a refused HEAD has no content whatever its Content-Length says.
        self.waiting_refusal = None
        self.bodiless_refusals = 0

    def feed(self, data):
        if self.close_delimited:
            return
        self.buf += data
        while self.buf:
            if self.must_close:
                raise Violation('bytes after %s: %r' % (self.must_close, bytes(self.buf[:80])))
            if not self.parse_one():
                return

    def parse_one(self):
        buf = self.buf
        end = buf.find(b'\r\n\r\n')
        if end < 0:
            if not b'HTTP/1.'.startswith(bytes(buf[:7])):
                raise Violation('not a status line: %r' % bytes(buf[:80]))
            if len(buf) > 65536:
                raise Violation('response head longer than 64 KiB')
            return False
        lines = bytes(buf[:end]).split(b'\r\n')
        m = STATUS_LINE.fullmatch(lines[0])
        if not m:
            raise Violation('bad status line: %r' % lines[0][:120])
        code = int(m.group(1))
        fields = {}
        for line in lines[1:]:
            f = FIELD_LINE.fullmatch(line)
            if not f:
                raise Violation('bad header line: %r' % line[:120])
            name = f.group(1).lower()
            if name in fields and name in (b'content-length', b'transfer-encoding'):
                raise Violation('repeated %s' % name.decode())
            fields[name] = f.group(2).rstrip(b' \t')
        method = fields.get(b'x-method')
        cl = fields.get(b'content-length')
        te = fields.get(b'transfer-encoding')
        if cl is not None and te is not None:
            raise Violation('Content-Length and Transfer-Encoding in one response')
        if cl is not None and not cl.isdigit():
            raise Violation('bad Content-Length %r' % cl)
        start = end + 4
        if 100 <= code < 200:
            if code != 100:
                raise Violation('unexpected interim response %d' % code)
            del buf[:start]
            self.interim += 1
            return True
        if method == b'HEAD' or code in (204, 304):
            length = 0
        elif te is not None:
            if te.lower() != b'chunked':
                raise Violation('response Transfer-Encoding %r' % te)
            length = self.chunked_length(start)
            if length is None:
                return False
        elif cl is not None:
            length = int(cl)
        else:
            self.close_delimited = True
            self.record(code, fields)
            del buf[:]
            return False
        if len(buf) < start + length:
            self.waiting_refusal = (code, fields, start) \
                if code >= 400 and method is None and length else None
            return False
        self.waiting_refusal = None
        del buf[:start + length]
        self.record(code, fields)
        return True

    def chunked_length(self, start):
        # -> bytes of the whole chunked body from START, or None if incomplete
        i = start
        buf = self.buf
        while True:
            eol = buf.find(b'\r\n', i)
            if eol < 0:
                return None
            size = bytes(buf[i:eol]).split(b';')[0]
            if not re.fullmatch(rb'[0-9A-Fa-f]+', size):
                raise Violation('bad chunk size in a response: %r' % size[:40])
            n = int(size, 16)
            if n == 0:
                t = buf.find(b'\r\n\r\n', eol)
                return None if t < 0 else t + 4 - start
            if len(buf) < eol + 2 + n + 2:
                return None
            if buf[eol + 2 + n:eol + 4 + n] != b'\r\n':
                raise Violation('chunk data not followed by CRLF in a response')
            i = eol + 4 + n

    def record(self, code, fields):
        self.responses.append((code, fields.get(b'x-method'), fields.get(b'x-body-length')))
        connection = fields.get(b'connection', b'').lower()
        if b'close' in [t.strip() for t in connection.split(b',')]:
            self.must_close = 'a response with Connection: close'
        elif code >= 400:
            self.must_close = 'a refusal (%d) without Connection: close' % code

    def finish(self):
        # The peer closed.
        if self.buf and not self.close_delimited:
            refusal = self.waiting_refusal
            if refusal and len(self.buf) == refusal[2]:
                # The refusal of a HEAD request: the head, then the close.
                self.bodiless_refusals += 1
                del self.buf[:]
                self.record(refusal[0], refusal[1])
                return
            raise Violation('response cut short by the close: %r' % bytes(self.buf[-80:]))

###
### Connections
###

class Conn:
    __slots__ = ('cid', 'pool', 'inputs', 'data', 'ends', 'pieces', 'gap', 'half_close',
                 'sock', 'piece', 'piece_left', 'sent', 'next_write', 'wrote_all',
                 'write_failed', 'reader', 'received', 'last_progress', 'opened', 'outcome',
                 'connecting', 'events', 'last_write')

    def __init__(self, cid, pool, inputs, pieces, gap, half_close):
        self.cid = cid
        self.pool = pool
        self.inputs = inputs
        self.data = b''.join(i.data for i in inputs)
        self.ends = []
        total = 0
        for i in inputs:
            total += len(i.data)
            self.ends.append(total)
        self.pieces = pieces
        self.gap = gap
        self.half_close = half_close
        self.sock = None
        self.piece = 0
        self.piece_left = pieces[0] if pieces else 0
        self.sent = 0
        self.next_write = 0.0
        self.wrote_all = False
        self.write_failed = None
        self.reader = ResponseReader()
        self.received = bytearray()
        self.last_progress = 0.0
        self.opened = 0.0
        self.outcome = None
        self.connecting = True
        self.events = 0
        self.last_write = 0.0

    def inputs_sent(self):
        # Inputs written in full, and the one being written when the server
        # closed: it read that one far enough to refuse it.
        whole = sum(1 for e in self.ends if e <= self.sent)
        cut = whole < len(self.ends) and self.outcome in ('closed', 'reset', 'violation')
        return whole + (1 if cut else 0)

def split_pieces(r, n, tiny):
    if n == 0:
        return [0]
    pieces = []
    left = n
    while left > 0:
        size = r.randrange(1, 4) if tiny else r.choice([1, 2, 3, 7, 16, 100, 512, 1500, 4096, 65536])
        size = min(size, left)
        pieces.append(size)
        left -= size
    return pieces

###
### The campaign
###

class Campaign:
    def __init__(self, args, port, pid, server_proc=None, server_log=None, restart=None):
        self.args = args
        self.port = port
        self.pid = pid
        self.server_proc = server_proc
        self.server_log = server_log
        self.restart = restart
        self.r = random.Random(args.seed)
        self.sel = selectors.DefaultSelector()
        self.conns = {}                 # fd -> Conn
        self.open_in_pool = collections.Counter()
        self.stats = collections.Counter()
        self.codes = collections.Counter()
        self.violations = collections.Counter()
        self.examples = {}
        self.saved = 0
        self.next_cid = 0
        self.rss_series = []
        self.crashes = 0
        self.control_failures = 0
        corpus_dir = args.corpus
        self.corpus = load_corpus(corpus_dir)
        self.valid_pool = []            # (name, head) answered 200 alone
        self.keep_alive_pool = []       # those of them that keep the connection
        self.seeds = []

    # --- the server ---------------------------------------------------

    def server_alive(self):
        if self.server_proc is not None and self.server_proc.poll() is not None:
            return False
        try:
            with open('/proc/%d/stat' % self.pid) as f:
                state = f.read().rsplit(')', 1)[1].split()[0]
            return state not in ('Z', 'X')
        except OSError:
            return False

    def rss(self, field='VmRSS'):
        try:
            with open('/proc/%d/status' % self.pid) as f:
                for line in f:
                    if line.startswith(field + ':'):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def control(self):
        """A plain GET on a new connection must get a 200 within 5 s."""
        try:
            with socket.create_connection(('127.0.0.1', self.port), timeout=5) as s:
                s.sendall(b'GET /control HTTP/1.1\r\nHost: control\r\nConnection: close\r\n\r\n')
                reader = ResponseReader()
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    data = s.recv(65536)
                    if not data:
                        break
                    reader.feed(data)
                reader.finish()
                return [c for c, _, _ in reader.responses] == [200]
        except (OSError, Violation):
            return False

    def check_server(self, where):
        self.stats['checks'] += 1
        alive = self.server_alive()
        ok = alive and self.control()
        self.rss_series.append((self.stats['inputs'], self.rss()))
        if not alive:
            self.crashes += 1
            self.note('server died', where)
            for conn in list(self.conns.values()):
                self.save(conn, 'in flight when the server died')
        elif not ok:
            self.control_failures += 1
            self.note('control request failed', where)
        return alive, ok

    # --- seeds and inputs ---------------------------------------------

    def calibrate(self):
        """Send each corpus request alone, with its body; those answered
        200 make the pool of valid inputs for the differential oracle."""
        r = random.Random(self.args.seed)
        refused = []
        for name, head in self.corpus:
            if split_head(head) is None:
                continue
            inp = with_body(r, head, name)
            self.seeds.append(inp.data)
            code = self.exchange_alone(inp.data)
            if code == 200:
                self.valid_pool.append((name, head))
                if not inp.closes:
                    self.keep_alive_pool.append((name, head))
            else:
                refused.append('%s:%s' % (name, code))
        self.seeds.extend(FRAMING_CASES)
        self.stats['corpus'] = len(self.corpus)
        self.stats['corpus_answered_200'] = len(self.valid_pool)
        if refused:
            log('calibration: not answered 200 alone (kept as mutation seeds only): %s'
                % ' '.join(refused))

    def exchange_alone(self, data):
        try:
            with socket.create_connection(('127.0.0.1', self.port), timeout=5) as s:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
                reader = ResponseReader()
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    reader.feed(chunk)
                reader.finish()
                finals = reader.responses
                return finals[0][0] if finals else None
        except (OSError, Violation) as e:
            return 'error(%s)' % e

    def make_inputs(self, r, count, valid_only):
        """COUNT requests: unmutated ones that keep the connection open,
        then (unless VALID_ONLY) one mutant, which the server therefore
        always reads.  A VALID_ONLY list may end with a closing request."""
        inputs = []
        for k in range(count - (0 if valid_only else 1)):
            name, head = r.choice(self.valid_pool if valid_only else self.keep_alive_pool)
            valid = with_body(r, head, name)
            inputs.append(valid)
            if valid.closes:
                return inputs
        if not valid_only:
            which = r.random()
            if which < 0.8:
                name, head = r.choice(self.valid_pool)
                seed = with_body(r, head, name).data
            elif which < 0.9:
                name, seed = 'framing case', r.choice(FRAMING_CASES)
            else:
                name, seed = 'any seed', r.choice(self.seeds)
            data = seed if name == 'framing case' and r.random() < 0.2 else mutate(r, seed, self.seeds)
            inputs.append(Input(data, False, origin=name))
        return inputs

    def new_conn(self, pool):
        r = self.r
        valid_only = r.random() < self.args.unmutated_connections
        count = r.choice([1, 1, 1, 2, 2, 3, 4, 6, 8, 12, 20])
        inputs = self.make_inputs(r, count, valid_only)
        total = sum(len(i.data) for i in inputs)
        if pool == 'fast':
            mode = r.random()
            if mode < 0.5:
                pieces = [total]
            else:
                pieces = split_pieces(r, total, tiny=mode > 0.95 and total < 3000)
            gap = 0.0
            half_close = True
        else:
            pieces = split_pieces(r, total, tiny=False)[:200]
            pieces[-1] += total - sum(pieces)
            gap = r.choice([0.001, 0.005, 0.02, 0.05])
            half_close = r.random() < 0.6
        conn = Conn(self.next_cid, pool, inputs, pieces, gap, half_close)
        self.next_cid += 1
        conn.events = 0
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setblocking(False)
            err = s.connect_ex(('127.0.0.1', self.port))
            if err not in (0, errno.EINPROGRESS):
                s.close()
                self.stats['connect_failed'] += 1
                self.note('connect failed', os.strerror(err))
                return None
        except OSError as e:
            self.stats['connect_failed'] += 1
            self.note('connect failed', str(e))
            return None
        conn.sock = s
        now = time.monotonic()
        conn.opened = now
        conn.last_progress = now
        self.conns[s.fileno()] = conn
        self.open_in_pool[pool] += 1
        self.watch(conn, selectors.EVENT_READ | selectors.EVENT_WRITE, new=True)
        self.stats['connections'] += 1
        self.stats['connections_' + pool] += 1
        return conn

    def watch(self, conn, events, new=False):
        if events == conn.events:
            return
        if new:
            self.sel.register(conn.sock, events, conn)
        else:
            self.sel.modify(conn.sock, events, conn)
        conn.events = events

    # --- moving bytes -------------------------------------------------

    def write(self, conn, now):
        if conn.connecting:
            err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self.stats['connect_failed'] += 1
                self.note('connect failed', os.strerror(err))
                self.end(conn, 'connect failed')
                return
            conn.connecting = False
        while not conn.wrote_all and now >= conn.next_write:
            chunk = conn.data[conn.sent:conn.sent + conn.piece_left]
            try:
                n = conn.sock.send(chunk) if chunk else 0
            except BlockingIOError:
                return
            except OSError as e:
                # The server closed (after a refusal): read what it said.
                conn.write_failed = errno.errorcode.get(e.errno, str(e.errno))
                conn.wrote_all = True
                self.watch(conn, selectors.EVENT_READ)
                return
            conn.sent += n
            conn.piece_left -= n
            conn.last_progress = now
            conn.last_write = now
            if conn.piece_left == 0:
                conn.piece += 1
                if conn.piece < len(conn.pieces):
                    conn.piece_left = conn.pieces[conn.piece]
                    if conn.gap:
                        conn.next_write = now + conn.gap
                        self.watch(conn, selectors.EVENT_READ)
                        return
                else:
                    conn.wrote_all = True
                    if conn.half_close:
                        try:
                            conn.sock.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                    self.watch(conn, selectors.EVENT_READ)
                    return

    def read(self, conn, now):
        try:
            data = conn.sock.recv(262144)
        except BlockingIOError:
            return
        except ConnectionResetError:
            self.end(conn, 'reset')
            return
        if not data:
            if conn.wrote_all and not conn.write_failed:
                wait = now - conn.last_write
                if wait > self.stats['max_close_wait_ms'] / 1000:
                    self.stats['max_close_wait_ms'] = int(wait * 1000)
            self.end(conn, 'closed')
            return
        conn.last_progress = now
        if len(conn.received) < 1 << 20:
            conn.received += data[:(1 << 20) - len(conn.received)]
        try:
            conn.reader.feed(data)
        except Violation as v:
            self.violation(conn, str(v))
            self.end(conn, 'violation')

    def end(self, conn, outcome):
        conn.outcome = outcome
        if conn.events:
            self.sel.unregister(conn.sock)
            conn.events = 0
        fd = conn.sock.fileno()
        del self.conns[fd]
        self.open_in_pool[conn.pool] -= 1
        conn.sock.close()
        sent = conn.inputs_sent()
        self.stats['inputs'] += sent
        self.stats['inputs_valid'] += sum(1 for i in conn.inputs[:sent] if i.valid)
        self.stats['bytes_sent'] += conn.sent
        self.stats['outcome_' + outcome] += 1
        if conn.write_failed:
            self.stats['write_stopped_' + conn.write_failed] += 1
        reader = conn.reader
        self.stats['responses'] += len(reader.responses)
        self.stats['interim'] += reader.interim
        self.stats['bodiless_refusals'] += reader.bodiless_refusals
        for code, _, _ in reader.responses:
            self.codes[code] += 1
        if outcome == 'violation':
            return
        if outcome in ('closed', 'reset'):
            try:
                reader.finish()
            except Violation as v:
                self.violation(conn, str(v) + ('' if outcome == 'closed' else ' (after a reset)'))
                return
        if outcome == 'reset':
            self.stats['resets'] += 1
        prefix = len(conn.data) - (0 if conn.inputs[-1].valid else len(conn.inputs[-1].data))
        if outcome in ('closed', 'reset') and conn.sent >= prefix:
            self.check_oracle(conn)

    def check_oracle(self, conn):
        """The unmutated requests at the head of the connection must get
        exactly their answers, in order."""
        expected = []
        for i in conn.inputs:
            if not i.valid:
                break
            expected.append((200, i.method.encode('latin-1'), str(i.body_length).encode()))
            if i.closes:
                break
        if not expected:
            return
        got = conn.reader.responses
        self.stats['oracle_connections'] += 1
        self.stats['oracle_answers'] += len(expected)
        mutant = not conn.inputs[-1].valid
        if (got[:len(expected)] if mutant else got) != expected:
            self.violation(conn, 'unmutated requests: expected %s, got %s'
                           % (expected[:4], got[:4]), kind='oracle mismatch')

    # --- bookkeeping --------------------------------------------------

    def note(self, kind, detail):
        self.violations[kind] += 1
        self.examples.setdefault(kind, detail)
        log('%s: %s' % (kind, detail))

    def violation(self, conn, detail, kind=None):
        kind = kind or re.sub(r'[:(].*', '', detail).strip()
        self.violations[kind] += 1
        path = self.save(conn, detail)
        if kind not in self.examples:
            self.examples[kind] = '%s (saved: %s)' % (detail, path)
            log('violation: %s; saved %s' % (detail, path))

    def save(self, conn, why):
        if not self.args.save_dir or self.saved >= 200:
            return None
        os.makedirs(self.args.save_dir, exist_ok=True)
        base = os.path.join(self.args.save_dir, 'conn-%d' % conn.cid)
        with open(base + '.sent', 'wb') as f:
            f.write(conn.data)
        with open(base + '.received', 'wb') as f:
            f.write(bytes(conn.received))
        with open(base + '.txt', 'w') as f:
            f.write('why: %s\npool: %s\npieces: %s\ngap: %s\nhalf-close: %s\nsent: %d of %d\n'
                    'write stopped: %s\ninputs: %s\n'
                    % (why, conn.pool, conn.pieces[:200], conn.gap, conn.half_close, conn.sent,
                       len(conn.data), conn.write_failed,
                       [(i.origin, i.valid, len(i.data)) for i in conn.inputs]))
        self.saved += 1
        return base

    # --- the loop -----------------------------------------------------

    def run(self):
        args = self.args
        start = time.monotonic()
        stop_at = start + args.max_seconds
        next_check = args.check_every
        next_progress = start + args.progress_seconds
        stopped_by = 'count'
        while True:
            now = time.monotonic()
            wanted = self.stats['launched_inputs'] < args.inputs and \
                (args.mutants is None or self.stats['launched_mutants'] < args.mutants)
            launching = wanted and now < stop_at
            if wanted and now >= stop_at:
                stopped_by = 'time'
            if launching:
                for pool, size in (('fast', args.connections), ('slow', args.slow_connections)):
                    while self.open_in_pool[pool] < size and \
                          self.stats['launched_inputs'] < args.inputs and \
                          (args.mutants is None or self.stats['launched_mutants'] < args.mutants):
                        conn = self.new_conn(pool)
                        if conn is None:
                            break
                        self.stats['launched_inputs'] += len(conn.inputs)
                        self.stats['launched_mutants'] += sum(1 for i in conn.inputs if not i.valid)
            if not self.conns and not launching:
                break
            timeout = 0.05
            for key, mask in self.sel.select(timeout):
                conn = key.data
                if conn.outcome:
                    continue
                now = time.monotonic()
                if mask & selectors.EVENT_READ:
                    self.read(conn, now)
                if not conn.outcome and mask & selectors.EVENT_WRITE:
                    self.write(conn, now)
            now = time.monotonic()
            for conn in list(self.conns.values()):
                if conn.outcome:
                    continue
                if not conn.wrote_all and not conn.connecting and conn.next_write and \
                   now >= conn.next_write and conn.events == selectors.EVENT_READ:
                    conn.next_write = 0.0
                    self.watch(conn, selectors.EVENT_READ | selectors.EVENT_WRITE)
                if now - conn.last_progress > args.hang_seconds:
                    self.stats['hangs'] += 1
                    self.violation(conn, 'hang: nothing moved for %ss (sent %d of %d bytes)'
                                   % (args.hang_seconds, conn.sent, len(conn.data)), kind='hang')
                    self.end(conn, 'hang')
            if self.stats['inputs'] >= next_check:
                next_check += args.check_every
                alive, _ = self.check_server('after %d inputs' % self.stats['inputs'])
                if not alive:
                    if self.restart:
                        self.pid, self.server_proc = self.restart()
                    else:
                        stopped_by = 'server died'
                        break
            if now >= next_progress:
                next_progress = now + args.progress_seconds
                elapsed = now - start
                log('%d inputs, %d connections, %d responses, %.0f inputs/s, RSS %s KiB, '
                    'violations %d, hangs %d, crashes %d'
                    % (self.stats['inputs'], self.stats['connections'], self.stats['responses'],
                       self.stats['inputs'] / elapsed, self.rss(), sum(self.violations.values()),
                       self.stats['hangs'], self.crashes))
        for conn in list(self.conns.values()):
            self.end(conn, 'abandoned')
        self.seconds = time.monotonic() - start
        self.stopped_by = stopped_by

###
### Starting a server
###

def start_plucky(args, log_path):
    """Start bin/plucky on the app, on a port the kernel picks.
    -> (Popen, port)"""
    cmd = server_command(args)
    logf = open(log_path, 'ab')
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
    deadline = time.monotonic() + 30
    pattern = re.compile(rb'listening on http://127\.0\.0\.1:(\d+)/')
    seen = 0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit('http-fuzz: the server exited with %s; see %s' % (proc.returncode, log_path))
        with open(log_path, 'rb') as f:
            f.seek(seen)
            text = f.read()
        m = pattern.search(text)
        if m:
            return proc, int(m.group(1))
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise SystemExit('http-fuzz: the server did not say where it listens within 30 s')

def server_command(args):
    cmd = []
    if args.server_cpu is not None:
        cmd += ['taskset', '-c', str(args.server_cpu)]
    cmd += ['bin/plucky', 'serve', args.app, '--host', '127.0.0.1', '--port', '0',
            '--workers', '1', '--header-timeout', str(args.header_timeout),
            '--body-timeout', str(args.body_timeout),
            '--keep-alive-timeout', str(args.keep_alive_timeout),
            '--write-timeout', '5', '--max-body', str(args.max_body)]
    if os.geteuid() == 0:
        cmd.append('--allow-root')  # plucky serve refuses root otherwise
    return cmd

def stop_plucky(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

###
### Reporting
###

def log(text):
    sys.stderr.write('http-fuzz: %s\n' % text)
    sys.stderr.flush()

def summary(c, rss_before, rss_after, hwm):
    s = c.stats
    return {
        'inputs': s['inputs'],
        'inputs_mutated': s['inputs'] - s['inputs_valid'],
        'oracle_answers': s['oracle_answers'],
        'inputs_unmutated': s['inputs_valid'],
        'connections': s['connections'],
        'bytes_sent': s['bytes_sent'],
        'responses': s['responses'],
        'interim_100': s['interim'],
        'bodiless_refusals': s['bodiless_refusals'],
        'codes': {str(k): v for k, v in sorted(c.codes.items())},
        'closed_by_server': s['outcome_closed'],
        'resets': s['outcome_reset'],
        'oracle_connections': s['oracle_connections'],
        'violations': sum(v for k, v in c.violations.items() if k not in ('hang',)),
        'violation_kinds': dict(c.violations),
        'examples': c.examples,
        'hangs': s['hangs'],
        'max_close_wait_ms': s['max_close_wait_ms'],
        'crashes': c.crashes,
        'control_failures': c.control_failures,
        'checks': s['checks'],
        'rss_before_kib': rss_before,
        'rss_after_kib': rss_after,
        'rss_peak_kib': hwm,
        'rss_series_kib': c.rss_series[::max(1, len(c.rss_series) // 20)],
        'seconds': round(c.seconds, 1),
        'inputs_per_second': round(s['inputs'] / c.seconds) if c.seconds else 0,
        'stopped_by': c.stopped_by,
        'corpus': s['corpus'],
        'corpus_answered_200': s['corpus_answered_200'],
        'seed': c.args.seed,
    }

def append_results(path, r):
    """Append to PATH a Markdown report of the summary R."""
    with open(path, 'a') as f:
        f.write('\n## tests/fuzz/http-fuzz.py, %s\n\n' % r['date'])
        f.write('| inputs | mutated | unmutated | connections | answers | inputs/s | mutated/s | '
                'seconds | crashes | hangs | rule violations | control failures | '
                'RSS before KiB | RSS after KiB | peak RSS KiB |\n')
        f.write('|' + '---:|' * 15 + '\n')
        f.write('| %d | %d | %d | %d | %d | %d | %d | %s | %d | %d | %d | %d | %s | %s | %s |\n'
                % (r['inputs'], r['inputs_mutated'], r['inputs_unmutated'], r['connections'],
                   r['responses'], r['inputs_per_second'],
                   round(r['inputs_mutated'] / r['seconds']) if r['seconds'] else 0,
                   r['seconds'], r['crashes'], r['hangs'], r['violations'],
                   r['control_failures'], r['rss_before_kib'], r['rss_after_kib'],
                   r['rss_peak_kib']))
        f.write('\n- an input: one request, a corpus head with its body, mutated or not.  Each '
                'connection carries 1 to 20 unmutated requests and then one mutant (one '
                'connection in ten: unmutated requests only), pipelined, written whole, split '
                'into random-sized writes or paced; so the server reads every input counted '
                '(a mutant the server cut off by closing while it was being written counts: '
                'the server read enough of it to refuse it).\n')
        f.write('- answers by status: %s; 100 Continue: %d; refusals that came without '
                'content (of HEAD requests): %d.  %d unmutated requests (on %d '
                'connections) got exactly the answer expected, in order (200, their method '
                'and body length).  Connections closed by the server: %d, reset by it: %d; the '
                'longest wait from the last byte sent to the close: %.1f s.\n'
                % (', '.join('%s: %d' % kv for kv in r['codes'].items()), r['interim_100'],
                   r.get('bodiless_refusals', 0), r['oracle_answers'], r['oracle_connections'], r['closed_by_server'],
                   r['resets'], r['max_close_wait_ms'] / 1000))
        f.write('- the server process was checked (alive, and a control GET answered 200) '
                '%d times, every %d inputs; RSS is its VmRSS before the first input and after '
                'the last connection closed; during the run: %s.\n'
                % (r['checks'], r['check_every'],
                   ', '.join('%s KiB at %d' % (kib, n) for n, kib in r['rss_series_kib'])))
        if r['violation_kinds']:
            f.write('- rule violations by kind: %s.\n' % ', '.join(
                '%s: %d' % kv for kv in r['violation_kinds'].items()))
        if r.get('server_log_lines') is not None:
            f.write('- server log lines other than "listening on" (and Guile\'s compilation '
                    'notes): %d.\n' % r['server_log_lines'])
        f.write('- stopped by: %s; seed %s.\n\n' % (r['stopped_by'], r['seed']))
        f.write('Machine: %s; plucky %s; the server %s.\n\n'
                % (r['machine'], r['plucky'],
                   'pinned with taskset' if r['server_command'] and
                   r['server_command'][0] == 'taskset' else 'not pinned'))
        f.write('Commands:\n\n```\n%s\n' % ' '.join(r['argv']))
        if r['server_command']:
            f.write('%s   # started by the former; port picked by the kernel\n'
                    % ' '.join(r['server_command']))
        f.write('```\n')

def cpu_model():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return '?'

def plucky_version():
    # The commit of the tree the server ran from, and whether its plucky/
    # differed from it.
    try:
        commit = subprocess.run(['git', '-C', ROOT, 'rev-parse', '--short', 'HEAD'],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(['git', '-C', ROOT, 'status', '--porcelain', '--', 'plucky', 'bin'],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (commit or '?') + (' plus uncommitted changes to plucky/ bin/' if dirty else '')
    except (OSError, subprocess.SubprocessError):
        return '?'

def guile_version():
    try:
        return subprocess.run(['guile', '--version'], capture_output=True, text=True,
                              timeout=10).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return 'guile ?'

###
### Main
###

def main(argv):
    p = argparse.ArgumentParser(description='Fuzz a plucky server over sockets.')
    p.add_argument('--serve', action='store_true', help='start bin/plucky on the app (--app)')
    p.add_argument('--app', default='tests/fuzz/app.scm',
                   help='with --serve: the app file, relative to the repository or absolute '
                        '(default tests/fuzz/app.scm; tests/fuzz/port-app.scm reads bodies '
                        'as ports); it must answer as tests/fuzz/app.scm does')
    p.add_argument('--port', type=int, help='port of a running server on 127.0.0.1')
    p.add_argument('--pid', type=int, help='PID of that server (checked after every batch)')
    p.add_argument('--inputs', type=int, default=20000, help='inputs to send (default 20000)')
    p.add_argument('--mutants', type=int, default=None,
                   help='stop once this many mutated inputs are sent (default: no such bound)')
    p.add_argument('--max-seconds', type=float, default=600, help='time bound (default 600)')
    p.add_argument('--connections', type=int, default=48, help='fast connections at once')
    p.add_argument('--slow-connections', type=int, default=24, help='paced connections at once')
    p.add_argument('--unmutated-connections', type=float, default=0.1,
                   help='share of connections without a mutant')
    p.add_argument('--check-every', type=int, default=10000, help='inputs between server checks')
    p.add_argument('--hang-seconds', type=float, default=15, help='a connection silent this long is a hang')
    p.add_argument('--seed', type=int, default=None)
    p.add_argument('--corpus', default=os.path.join(ROOT, 'tests/data/requests'))
    p.add_argument('--save-dir', default=None, help='save connections that break a rule here')
    p.add_argument('--results', default=None, help='append a Markdown report to this file')
    p.add_argument('--progress-seconds', type=float, default=30)
    p.add_argument('--server-cpu', type=int, default=None, help='with --serve: taskset the server')
    p.add_argument('--server-log', default=None, help='with --serve: the server log file')
    p.add_argument('--header-timeout', type=int, default=2)
    p.add_argument('--body-timeout', type=int, default=2)
    p.add_argument('--keep-alive-timeout', type=int, default=2)
    p.add_argument('--max-body', type=int, default=1048576)
    p.add_argument('--report-from', default=None,
                   help='append to --results the report of a JSON summary (a run\'s last line)')
    args = p.parse_args(argv[1:])
    if args.report_from:
        with open(args.report_from) as f:
            append_results(args.results or '/dev/stdout', json.loads(f.read().splitlines()[-1]))
        return 0
    if args.seed is None:
        args.seed = random.randrange(1 << 32)
    if not args.serve and not (args.port and args.pid):
        p.error('give --serve, or --port and --pid of a running server')

    proc = None
    log_path = None
    restart = None
    if args.serve:
        log_path = args.server_log or os.path.join(
            os.environ.get('TMPDIR', '/tmp'), 'http-fuzz-server-%d.log' % os.getpid())
        proc, port = start_plucky(args, log_path)
        pid = proc.pid
        if args.server_cpu is not None:
            # taskset execs the server: same PID.
            pass

        def restart_server():
            stop_plucky(campaign.server_proc)
            new, new_port = start_plucky(args, log_path)
            campaign.port = new_port
            campaign.server_proc = new
            return new.pid, new
        restart = restart_server
    else:
        port, pid = args.port, args.pid

    campaign = Campaign(args, port, pid, proc, log_path, restart)
    try:
        log('seed %d; server PID %d on port %d' % (args.seed, pid, port))
        if not campaign.control():
            raise SystemExit('http-fuzz: the server does not answer a plain GET with 200')
        campaign.calibrate()
        if not campaign.valid_pool:
            raise SystemExit('http-fuzz: no corpus request was answered 200')
        rss_before = campaign.rss()
        campaign.rss_series.append((0, rss_before))
        campaign.run()
        alive, ok = campaign.check_server('after the campaign')
        rss_after = campaign.rss()
        hwm = campaign.rss('VmHWM')
    finally:
        if proc is not None:
            stop_plucky(campaign.server_proc or proc)
    result = summary(campaign, rss_before, rss_after, hwm)
    result['check_every'] = args.check_every
    result['date'] = time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())
    result['machine'] = '%d CPUs (%s), Linux %s; %s' % (
        os.cpu_count(), cpu_model(), os.uname().release, guile_version())
    result['plucky'] = plucky_version()
    result['argv'] = ['tests/fuzz/http-fuzz.py'] + argv[1:]
    result['server_command'] = server_command(args) if args.serve else None
    log_lines = None
    if log_path:
        with open(log_path, 'rb') as f:
            lines = [l for l in f.read().decode('latin-1').splitlines()
                     if l.strip() and 'listening on' not in l and not l.startswith(';;;')]
        log_lines = len(lines)
        result['server_log_lines'] = log_lines
        result['server_log_sample'] = lines[:20]
    if args.results:
        append_results(args.results, result)
    print(json.dumps(result, sort_keys=True))
    bad = result['crashes'] or result['hangs'] or result['violations'] or \
        result['control_failures'] or result['stopped_by'] == 'server died'
    return 1 if bad else 0

if __name__ == '__main__':
    sys.exit(main(sys.argv))

# tests/fuzz/http-fuzz.py ends here
