/* host_checks_cost.c — what kvattn_validate, kvattn_workspace_size (CUDA backend) and kvattn_backend_available cost
 * on the host, outside the CUDA runtime's launches: the bench's 8x8192 decode shape (bf16, 32 / 8 heads, D 128, page
 * 16, lse), with fake device addresses (nothing is read). Without a device, workspace_size answers from the stand-in
 * device and backend_available from cudaGetDevice's failure; with one, both read the cached device facts.
 * Build and run (sixty-first session, on the 2-core machine with no GPU, against a CUDA build's static library):
 *   gcc -O2 -Iinclude dev/host_checks_cost.c build/libkvattn.a -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt \
 *       -lstdc++ -lm -fopenmp -lpthread -o /tmp/host_checks_cost && /tmp/host_checks_cost */
#include "kvattn.h"
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec*1e-3;}
int main(void){
  enum{B=8,H=32,HK=8,D=128,PS=16,MP=512};
  static int32_t bt[B*MP], sl[B], cu[B+1];
  kvattn_params p=kvattn_params_default();
  p.dtype=KVATTN_BF16;p.batch=B;p.num_heads=H;p.num_kv_heads=HK;p.head_dim=D;
  p.q=(void*)0x10000000;p.cu_seqlens_q=cu;p.total_q=B;
  p.k_cache=(void*)0x100000000;p.v_cache=(void*)0x900000000;p.block_table=bt;p.max_pages_per_seq=MP;p.num_pages=B*MP;p.page_size=PS;
  p.cache_seqlens=sl;p.out=(void*)0x20000000;p.softmax_lse=(float*)0x30000000;p.causal=1;
  size_t ws=0; int st=kvattn_workspace_size(&p,KVATTN_BACKEND_CUDA,&ws); printf("ws st=%d %zu %s\n",st,ws,kvattn_last_error());
  for(int r=0;r<3;r++){
  double t0=now(); for(int i=0;i<100000;i++) kvattn_validate(&p,KVATTN_BACKEND_CUDA); double t1=now();
  for(int i=0;i<100000;i++) kvattn_workspace_size(&p,KVATTN_BACKEND_CUDA,&ws); double t2=now();
  for(int i=0;i<100000;i++) kvattn_backend_available(KVATTN_BACKEND_CUDA); double t3=now();
  printf("validate %.3f us, workspace_size %.3f us, backend_available %.3f us\n",(t1-t0)/1e5,(t2-t1)/1e5,(t3-t2)/1e5);}
}
