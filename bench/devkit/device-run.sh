# One device call: embedded single (+ Mosquitto), PostgreSQL single, bare Aedes; all archived into $OUT/kit-results.tgz
set -u
O=$OUT; W=/tmp/kitres; mkdir -p $W; nproc; lscpu | grep -E "Model name|Thread|Core|Socket"
common="DEVICES=10000 GENS=8 STEP_S=10 WARM_S=3 VIS_S=10 RATES=10000,15000,20000,25000,30000,40000,60000,80000"
env $common OUT=$W/emb BUDGET_S=235 HARD_S=255 KIT_TIMEOUT=262 bash .devkit/run.sh single > /dev/null 2>&1; echo "embedded rc=$?"
env $common DB=pg SKIP_MOSQUITTO=1 OUT=$W/pg BUDGET_S=125 HARD_S=140 KIT_TIMEOUT=148 bash .devkit/run.sh single > /dev/null 2>&1; echo "pg rc=$?"
env $common OUT=$W/aedes BUDGET_S=130 HARD_S=145 KIT_TIMEOUT=152 bash .devkit/run.sh aedes > /dev/null 2>&1; echo "aedes rc=$?"
tar czf $O/kit-results.tgz -C $W .
for f in $W/emb/single.txt $W/pg/single.txt $W/aedes/aedes.txt; do echo "== $f"; grep -v "^\s*claimed" $f | cut -c1-250; done
