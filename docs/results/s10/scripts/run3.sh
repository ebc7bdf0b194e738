set -u
export PYTHONPATH=$PWD/src
C=""
for s in 256,4096,512 192,4096,512 384,4096,512 128,4096,512 32,4096,512; do C="$C $s,64,64,1,4,1,16,int8_meet $s,64,128,1,4,1,16,int8_meet"; done
for s in 256,3072,1536 192,3072,1536 128,3072,1536 64,7168,2048; do C="$C $s,64,64,1,4,2,16,int8_meet $s,64,64,1,4,3,16,int8_meet"; done
C="$C 384,3072,1536,64,128,1,4,2,16,int8 384,4096,512,64,128,1,4,1,16,int8 512,4096,512,64,128,1,4,1,16,int8 512,4096,512 1024,4096,512"
timeout 400 python3 tools/knob_ab.py MEET_PER_SM 1 2 $C > $OUT/knob-run3.txt 2>&1; echo "knob rc=$?"
cat $OUT/knob-run3.txt | cut -c1-150
