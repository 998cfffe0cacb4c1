#!/usr/bin/env python3
"""Module-level import cycles of a Rust crate: every `crate::`/`super::` path of each module (non-test code)
is an edge to the longest module it names; prints the strongly connected components of more than one module.

Usage: scripts/module-cycles.py exporter/src engines/src src
"""
import os, re, sys
def modname(root, path):
    rel=os.path.relpath(path, root)[:-3]
    parts=rel.split(os.sep)
    if parts[-1] in ('mod','lib','main'): parts=parts[:-1]
    return '::'.join(parts) or 'crate'
def scan(root):
    mods={}
    for d,_,fs in os.walk(root):
        for f in fs:
            if f.endswith('.rs'):
                p=os.path.join(d,f); mods[modname(root,p)]=p
    edges={m:set() for m in mods}
    for m,p in mods.items():
        src=open(p).read()
        src=re.sub(r'#\[cfg\(test\)\]\s*mod tests \{.*', '', src, flags=re.S)
        src=re.sub(r'//[^\n]*','',src)
        parent=m.rsplit('::',1)[0] if '::' in m else ''
        for mm in re.finditer(r'\b(crate|super)((?:::[a-z_][a-z0-9_]*)+)', src):
            base = mm.group(1); path=mm.group(2).strip(':').split('::')
            if base=='super':
                prefix = parent.split('::') if parent else []
            else:
                prefix=[]
            full=prefix+path
            # longest module prefix
            for k in range(len(full),0,-1):
                cand='::'.join(full[:k])
                if cand in mods and cand!=m and not m.startswith(cand+'::') :
                    edges[m].add(cand); break
        # use super::{a,b}
        for mm in re.finditer(r'use (crate|super)::\{([^}]*)\}', src):
            prefix = (parent.split('::') if parent else []) if mm.group(1)=='super' else []
            for item in mm.group(2).split(','):
                first=item.strip().split('::')[0]
                cand='::'.join(prefix+[first])
                if cand in mods and cand!=m and not m.startswith(cand+'::'): edges[m].add(cand)
    return edges
def sccs(edges):
    index={}; low={}; st=[]; on=set(); out=[]; i=[0]
    sys.setrecursionlimit(10000)
    def sc(v):
        index[v]=low[v]=i[0]; i[0]+=1; st.append(v); on.add(v)
        for w in edges[v]:
            if w not in index: sc(w); low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],index[w])
        if low[v]==index[v]:
            comp=[]
            while True:
                w=st.pop(); on.discard(w); comp.append(w)
                if w==v: break
            if len(comp)>1: out.append(sorted(comp))
    for v in edges:
        if v not in index: sc(v)
    return out
for root in sys.argv[1:]:
    e=scan(root)
    c=sccs(e)
    print(root, len(e), 'modules;', 'cycles:', [len(x) for x in c])
    for x in c: print('  ', x)
