# ownership/safety checks on the 9p mount /tmp/9 (cache=none)
M=/tmp/${OWNFS:-9}; D=$M/own; rm -rf $D; mkdir -p $D; chown 1000:1000 $D
echo "== as uid 1000"
setpriv --reuid=1000 --regid=1000 --clear-groups env D=$D bash -c '
cd '$D'; export HOME=$PWD
ok() { if "$@" >/tmp/o 2>&1; then echo "OK   $*"; else echo "FAIL $*: $(head -c 200 /tmp/o)"; fi; }
ok sh -c "echo a > f"; ok sh -c "echo b >> f"; ok chmod 600 f; ok mkdir d; ok sh -c "echo x > d/y"
ok mv f g; ok ln g h; ok ln -s g s; ok sh -c "umask 077; touch u"; ok mkdir -m 700 m; ok touch -d 2020-01-01 t; ok cp -p g gp
ok git init -q r; ok sh -c "cd r && echo hi > a && git add a && git -c user.name=t -c user.email=t@x commit -qm m"
ok cp g suid; ok chmod 4755 suid; ok cp g sgid; ok chmod 2755 sgid; ok mkdir sgd; ok chmod 2775 sgd
ls -ln . | sed "s/^/guest: /"
'
echo "== as root"
cd $D; ok() { if "$@" >/tmp/o 2>&1; then echo "OK   $*"; else echo "FAIL $*: $(head -c 200 /tmp/o)"; fi; }
ok touch rootsuid; ok chmod 4755 rootsuid; ok touch chown0; ok chown 0:0 chown0; ok touch chown5; ok chown 5555:5555 chown5
ok mknod cdev c 1 3; ok mkfifo fifo; ok python3 -c "import os; os.setxattr(\"rootsuid\", \"security.capability\", bytes.fromhex(\"0100000200200000000000000000000000000000\"))"; ok python3 -c "import os; os.setxattr(\"chown0\", \"user.x\", b\"1\")"
ls -ln $D | sed "s/^/guest-root: /"
echo "== raw 9p escape test"
ln -s /work/spike-14 $D/esc
[ "${OWNFS:-9}" = 9 ] && python3 /work/spike-14/raw9p.py 10.0.2.100 564 /work/spike-14/exp own esc secret-outside.txt 2>&1
