#!/bin/bash
# Guest init for the spike: host / is the guest's hostfs root (read mostly); tmpfs for /tmp.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t tmpfs t /tmp
M=/usr/lib/uml/modules/$(uname -r)/kernel
for m in fs/netfs/netfs fs/fscache/fscache net/9p/9pnet net/9p/9pnet_fd fs/9p/9p; do busybox insmod $M/$m.ko; done
ip link set lo up
IF=$(ls /sys/class/net | grep -v lo | head -1)
ip link set $IF mtu ${MTU:-1500} 2>&1
ip addr add 10.0.2.15/24 dev $IF; ip link set $IF up
echo "guest: if=$IF mtu=$(cat /sys/class/net/$IF/mtu)"
mkdir -p /tmp/9 /tmp/h
mount -t hostfs none /tmp/h -o /work/spike-14/hfs
mount -t 9p -o trans=tcp,port=564,version=9p2000.L,msize=${MSIZE:-262144},access=user,aname=/work/spike-14/exp${NINEOPTS:+,$NINEOPTS} 10.0.2.100 /tmp/9 || echo "9p mount failed"
mkdir -p /tmp/9l; mount -t 9p -o trans=tcp,port=564,version=9p2000.L,msize=${MSIZE:-262144},access=user,aname=/work/spike-14/exp,cache=loose${NINEOPTS:+,$NINEOPTS} 10.0.2.100 /tmp/9l || echo "9p loose mount failed"
grep -E ' /tmp/(9|h|9l) ' /proc/mounts
if [ -n "$VFS" ]; then
  for m in fs/fuse/fuse fs/fuse/virtiofs; do busybox insmod $M/$m.ko; done
  mkdir -p /tmp/v; mount -t virtiofs spike /tmp/v || echo "virtiofs mount failed"; grep ' /tmp/v ' /proc/mounts
fi
/bin/bash /work/spike-14/${SCRIPT:-guest-bench.sh}
echo "guest: done"
sync
busybox poweroff -f
