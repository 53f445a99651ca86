#!/usr/bin/env bash
# Submits a sharded oatest campaign to Slurm: an array job of N shards and a merge job that runs after all of
# them (--dependency=afterany). Prints the campaign directory and both job ids.
#   usage: submit-slurm.sh N FUZZ_ARGS...     e.g. submit-slurm.sh 8 --target ort --hours 12 --seed 7
#   OATEST_RESULTS  the campaign directory, on a filesystem every node sees (default: results/slurm-<timestamp>)
#   OATEST_SBATCH_ARGS  extra sbatch flags for both jobs (e.g. "--partition=cpu --time=13:00:00")
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n=${1:?usage: submit-slurm.sh N FUZZ_ARGS...}
shift
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "submit-slurm: N must be a positive number of shards, not $n" >&2; exit 2; }
results=${OATEST_RESULTS:-$PWD/results/slurm-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$results/logs"
results=$(cd "$results" && pwd)
export OATEST_RESULTS=$results
read -r -a extra <<< "${OATEST_SBATCH_ARGS:-}"
array=$(sbatch --parsable "${extra[@]}" --array="0-$((n - 1))" --export=ALL \
  --output="$results/logs/shard-%a.out" "$here/oatest-shard.sbatch" "$@")
array=${array%%;*}
merge=$(sbatch --parsable "${extra[@]}" --dependency="afterany:$array" --export=ALL \
  --output="$results/logs/merge.out" "$here/oatest-merge.sbatch")
merge=${merge%%;*}
echo "campaign $results"
echo "array job $array ($n shards), merge job $merge -> $results/merged"
