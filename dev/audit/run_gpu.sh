#!/bin/bash
# Runs the audit on a GPU machine (H200). audit_main under memcheck in three scheduler configurations, then
# audit_overflow without a sanitizer. Exit status != 0 when anything failed.
set -o pipefail
cd "$(dirname "$0")/../bin"  # the binaries (build.sh); logs are written there too
rc=0
CS="compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20"
$CS ./audit_main "$@" 2>&1 | tee audit_main.memcheck.log || rc=1
# the early-start / lean-plan paths off, and PDL off (plain launch order): other scheduler code paths
KVATTN_NO_LEAN=1 $CS ./audit_main "F " 2>&1 | tee audit_main.nolean.log || rc=1
KVATTN_NO_EARLY=1 KVATTN_NO_PDL=1 $CS ./audit_main "D " 2>&1 | tee audit_main.nopdl.log || rc=1
./audit_overflow 2>&1 | tee audit_overflow.log || rc=1
grep -h "^RESULT\|ERROR SUMMARY" *.log
exit $rc
