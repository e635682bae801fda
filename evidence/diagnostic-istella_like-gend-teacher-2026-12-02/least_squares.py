"""Least squares on the Istella analogue's columns: each view (x regular, z privileged, xz both) fitted to the
training labels by ordinary least squares and scored by NDCG@8 on the scored test lists, one draw (seed 3, label
seed 3) at the sized fraction (--synthetic_scale=3.66569). Not a calibration: no teacher of a run is this model; it
shows what a linear ranker on the same columns reaches, beside the trained teachers.

  python evidence/diagnostic-istella_like-gend-teacher-2026-12-02/least_squares.py istella_like 3.66569 \
      weight=1,leak=0.6,noise=0.2 weight=1,leak=0.6,noise=0
"""
import numpy as np, sys, json
from pfd_jax.data import analogues as A, datasets
from pfd_jax.data.config import DataConfig
def ndcg8(score, y, off):
  out=[]
  for i in range(len(off)-1):
    s,r=score[off[i]:off[i+1]], y[off[i]:off[i+1]]
    if r.max()<=0: continue
    g=2**r-1; o=np.argsort(-s, kind='stable')[:8]; d=1/np.log2(np.arange(2,10))
    out.append((g[o]*d[:len(o)]).sum()/(np.sort(g)[::-1][:8]*d[:min(8,len(g))]).sum())
  return np.mean(out)
name=sys.argv[1]; scale=float(sys.argv[2])
for st in sys.argv[3:]:
  raw=A.generate(name, scale=scale, seed=3, settings=A.parse_settings(st+',scored=1'), label_seed=3)
  a=A.resolved(name, A.parse_settings(st), scale); fac,lam,_,_=A._design(np.random.default_rng(3),a)
  ds=datasets.prepare(DataConfig(dataset=name, analogue=st+',scored=1', label_seed=3), raw)
  true=set(np.flatnonzero((fac==0)).tolist()); ov=len(true & set(ds.privileged.tolist()))
  tr,te=ds.splits['train'],ds.splits['test']
  # train on positive groups only, as the data loss does
  res={}
  for nm in ('x','z','xz'):
    f=lambda g: {'x':g.x,'z':g.z,'xz':np.c_[g.x,g.z]}[nm]
    X=np.c_[f(tr),np.ones(tr.x.shape[0])]; b=np.linalg.lstsq(X,tr.y,rcond=None)[0]
    res[nm]=ndcg8(np.c_[f(te),np.ones(te.x.shape[0])]@b, te.y, te.offsets)
  print(st, 'priv overlap', ov, {k:round(float(v),3) for k,v in res.items()}, 'PFD-t %+.1f GenD-t %+.1f'%(100*(res['xz']/res['x']-1),100*(res['z']/res['x']-1)), flush=True)
