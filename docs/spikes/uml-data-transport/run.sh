#!/bin/bash
# run.sh LABEL KEY=VAL... : start diod on a unix socket, then the guest via proto; log to logs/LABEL.log
# env: DIOD_WRAP (e.g. "unshare -U --map-users=... "), MTU, MEM
cd /work/spike-14; mkdir -p logs
label=$1; shift
sock=/tmp/spike14-diod.sock; rm -f $sock
$DIOD_WRAP /usr/sbin/diod -f -n -N ${DIOD_OPTS} -l $sock -e /work/spike-14/exp -L /work/spike-14/logs/$label.diod.log &
dpid=$!
for i in $(seq 50); do [ -S $sock ] && break; sleep 0.1; done
timeout ${TMO:-900} ./proto ${MTU:-1500} $sock -- /usr/bin/linux.uml mem=${MEM:-512M} root=/dev/root rootfstype=hostfs rootflags=/ rw \
  init=/work/spike-14/init.sh con=null con0=fd:0,fd:1 ssl=null MTU=${MTU:-1500} "$@" </dev/null >logs/$label.log 2>&1
echo "rc=$?" >> logs/$label.log
kill $dpid; wait $dpid 2>/dev/null
rm -f $sock
