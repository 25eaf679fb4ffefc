#!/bin/bash
# run-vfs.sh LABEL KEY=VAL... : virtiofsd (Debian 12, C) behind vurelay, UML with virtio_uml.device=relay:26
cd /work/spike-14; mkdir -p logs vexp
label=$1; shift
vs=/tmp/spike14-vfs.sock; rs=/tmp/spike14-relay.sock; rm -f $vs $rs
ulimit -Hn 1048576; ulimit -Sn 1048576
$VFSD_WRAP /usr/lib/qemu/virtiofsd --socket-path=$vs -o source=/work/spike-14/vexp -o cache=${VCACHE:-auto} ${VFSD_OPTS} > logs/$label.vfsd.log 2>&1 &
vpid=$!
for i in $(seq 50); do [ -S $vs ] && break; sleep 0.1; done
./vurelay $rs $vs spike > logs/$label.relay.log 2>&1 &
rpid=$!
for i in $(seq 50); do [ -S $rs ] && break; sleep 0.1; done
# the 9p side is still wired (proto) but no diod listens: the 9p mount just fails
timeout ${TMO:-900} ./proto ${MTU:-1500} /tmp/spike14-none.sock -- /usr/bin/linux.uml mem=${MEM:-512M} root=/dev/root rootfstype=hostfs rootflags=/ rw \
  init=/work/spike-14/init.sh con=null con0=fd:0,fd:1 ssl=null VFS=1 virtio_uml.device=$rs:26 "$@" </dev/null >logs/$label.log 2>&1
echo "rc=$?" >> logs/$label.log
kill $vpid $rpid 2>/dev/null; wait 2>/dev/null
rm -f $vs $rs
