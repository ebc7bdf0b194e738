set -u
export PYTHONPATH=$PWD/src
S="128,4096,512 128,2880,512 192,4096,512 256,2880,512 512,2880,512 1024,4096,512 64,3072,1536 128,3072,1536 384,3072,1536 512,3072,1536 128,2880,2880 192,2880,2880 256,7168,2048 128,2112,7168"
M="256,3072,1536 64,7168,2048 64,4608,7168 128,4608,7168"
timeout 100 python3 tools/knob_ab.py INT8_W_PF_BYTES 512 256 $S INT8_W_PF_PROGS=64 > $OUT/wpf-bytes256-run6.txt 2>&1; echo "b256 rc=$?"
timeout 100 python3 tools/knob_ab.py INT8_W_PF_BYTES 512 1024 $S INT8_W_PF_PROGS=64 > $OUT/wpf-bytes1024-run6.txt 2>&1; echo "b1024 rc=$?"
timeout 100 python3 tools/knob_ab.py INT8_W_PF_PROGS 64 128 $S INT8_W_PF_BYTES=512 > $OUT/wpf-progs128-run6.txt 2>&1; echo "p128 rc=$?"
timeout 100 python3 tools/knob_ab.py INT8_W_PF_PROGS 64 32 $S INT8_W_PF_BYTES=512 > $OUT/wpf-progs32-run6.txt 2>&1; echo "p32 rc=$?"
timeout 60 python3 tools/knob_ab.py MEET_W_PF_BYTES 0 512 $M > $OUT/meetpf512-run6.txt 2>&1; echo "m512 rc=$?"
timeout 60 python3 tools/knob_ab.py MEET_W_PF_BYTES 0 1024 $M > $OUT/meetpf1024-run6.txt 2>&1; echo "m1024 rc=$?"
for f in $OUT/wpf-bytes256-run6.txt $OUT/wpf-bytes1024-run6.txt $OUT/wpf-progs128-run6.txt $OUT/wpf-progs32-run6.txt $OUT/meetpf512-run6.txt $OUT/meetpf1024-run6.txt; do grep -v "^held" $f | cut -c1-100; done
