set -u
export PYTHONPATH=$PWD/src
python3 -c "import torch,triton;print('torch',torch.__version__,'triton',triton.__version__,torch.cuda.get_device_name())"
git log --oneline -1 2>/dev/null || true
timeout 200 python3 -m mxfp4 bench --shapes-set bench --providers mxfp4 cublas_bf16 stream_floor --out /tmp/b1 --no-progress --no-plot --budget 0.3 > $OUT/bench-run1.log 2>&1; echo "bench rc=$?"
S="256,3072,1536 192,3072,1536 128,3072,1536 256,4096,512 192,4096,512 384,4096,512 384,3072,1536 64,7168,2048"
C=""
for s in $S; do C="$C $s $s,64,32,1,4,3,8,int8_meet $s,64,32,1,4,4,4,int8_meet"; done
timeout 330 python3 tools/knob_ab.py MEET_PER_SM 2 4 $C > $OUT/knob-run1.txt 2>&1; echo "knob rc=$?"
tail -n 12 $OUT/bench-run1.log
cat $OUT/knob-run1.txt | cut -c1-150
