# tests/data/json/floats-cpython.py: /usr/bin/python3 tests/data/json/floats-cpython.py > tests/data/json/floats-cpython.txt
import random, struct
random.seed(17)
print("# bits of a double (hex, big-endian) and CPython's repr of it; made by")
print("# /usr/bin/python3 with random.seed(17): random bit patterns, subnormals,")
print("# short decimals at every exponent, integers as doubles")
def line(b):
    x = struct.unpack('>d', struct.pack('>Q', b))[0]
    if x == x and abs(x) != float('inf'):
        print("%016x %r" % (b, x))
for i in range(3000): line(random.getrandbits(64))
for i in range(300): line(random.getrandbits(52) | random.getrandbits(1) << 63)
for i in range(400):
    m = random.randint(1, 99999); p = random.randint(-330, 305)
    line(struct.unpack('>Q', struct.pack('>d', float("%de%d" % (m, p))))[0])
for i in range(300):
    line(struct.unpack('>Q', struct.pack('>d', float(random.randint(-2**60, 2**60))))[0])
