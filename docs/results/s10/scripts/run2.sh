set -u
export PYTHONPATH=$PWD/src
S="256,3072,1536 192,3072,1536 256,4096,512 192,4096,512 128,3072,1536 64,7168,2048"
C=""
for s in $S; do C="$C $s,64,64,1,4,6,4,int8_meet $s,64,64,1,4,5,4,int8_meet $s,64,64,1,4,10,2,int8_meet"; done
timeout 400 python3 tools/knob_ab.py MEET_PER_SM 1 2 $C > $OUT/knob-run2.txt 2>&1; echo "knob rc=$?"
cat $OUT/knob-run2.txt | cut -c1-150
