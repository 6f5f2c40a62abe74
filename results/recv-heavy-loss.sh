#!/bin/bash
# The receiver under heavy media loss with a sender that answers no NACK (results/profile.md
# section 54). As root, after `tools/netlab up --name s43 --loss 85 --port 5004`:
#   results/recv-heavy-loss.sh RECEIVER_BIN TAG
# env STREAMER (the sender, .build/release/streamer), HEVC (bench peers' clip, test.hevc), OUT
# (where the stats go, .). Prints TAG and the receiver's user and system seconds (/usr/bin/time);
# the receiver's stats are OUT/stats-TAG.json, the sender's OUT/send-TAG.json.
set -u
receiver=$1; tag=$2
netlab="$(dirname "$0")/../tools/netlab"; export NETLAB_NAME=s43
out=${OUT:-.}
"$netlab" exec rcv /usr/bin/time -f "%U %S" -o "$out/time-$tag" "$receiver" recv --listen 0.0.0.0:5004 --quiet \
  --stats "$out/stats-$tag.json" &
recv=$!
sleep 0.5
"$netlab" exec snd "${STREAMER:-.build/release/streamer}" send --to 10.77.2.2:5004 --source "${HEVC:-test.hevc}" \
  --fps 30 --frames 300 --no-rtx --quiet --stats "$out/send-$tag.json"
sleep 1.5
pkill -INT -f "recv --listen 0.0.0.0:5004"
wait $recv
echo "$tag $(cat "$out/time-$tag")"
