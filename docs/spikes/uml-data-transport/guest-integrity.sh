# random data through the transport both ways; sha256 in the guest (of what it wrote, and of
# what it reads back after dropping caches), and a host-made file read back by the guest
M=/tmp/${OWNFS:-9}
head -c ${RMB:-256}M /dev/urandom > /tmp/rnd.src 2>/dev/null || true
echo "INTEG src $(sha256sum < /tmp/rnd.src)"
s=$(date +%s.%N); cp /tmp/rnd.src $M/rnd; sync; e=$(date +%s.%N); echo "INTEG wrote ${RMB:-256}MiB random in $(echo "$e - $s" | bc) s"
rm /tmp/rnd.src; echo 3 > /proc/sys/vm/drop_caches
s=$(date +%s.%N); echo "INTEG readback $(sha256sum < $M/rnd)"; e=$(date +%s.%N); echo "INTEG read+hash in $(echo "$e - $s" | bc) s"
[ -f $M/hostrnd ] && echo "INTEG hostfile $(sha256sum < $M/hostrnd)"
