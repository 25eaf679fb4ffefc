# Runs bench-one.sh on hostfs (/tmp/h) and 9p (/tmp/9) as root and uid 1000.
FSLIST=${FSLIST:-9,h}; USERS=${USERS:-0,1000}
for fs in ${FSLIST//,/ }; do
  for u in ${USERS//,/ }; do
    D=/tmp/$fs/b$u; rm -rf $D; mkdir -p $D; chown $u:$u $D 2>&1
    echo "== fs=$fs uid=$u $(date +%T)"
    if [ $u = 0 ]; then bash /work/spike-14/bench-one.sh $D $fs
    else setpriv --reuid=$u --regid=$u --clear-groups bash /work/spike-14/bench-one.sh $D $fs; fi
    rm -rf $D
  done
done
