#!/usr/bin/env python3
"""Lists functions over 80 lines (the `fn` line to its closing brace) outside tests.
Usage: tools/long-functions.py [PATH-PREFIX]   (relative to the repository root, e.g. crates/wozkit-core)"""
import glob
import os
import re
import sys
root=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
prefix=sys.argv[1] if len(sys.argv)>1 else ''
rx=re.compile(r'^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)')
out=[]
for f in glob.glob(root+'/crates/*/src/**/*.rs',recursive=True):
    rel=os.path.relpath(f,root)
    if not rel.startswith(prefix): continue
    lines=open(f).read().split('\n')
    end=len(lines)
    for i,l in enumerate(lines):
        if l.strip()=='#[cfg(test)]' and i+1<len(lines) and re.match(r'\s*(pub\s+)?mod \w+',lines[i+1]):
            end=i;break
    for i in range(end):
        m=rx.match(lines[i])
        if not m: continue
        # a declaration without a body ends with ';' before any '{' line
        k=i
        while k<end and not lines[k].rstrip().endswith('{') and not lines[k].rstrip().endswith(';'):
            k+=1
        if k>=end or lines[k].rstrip().endswith(';'): continue
        ind=m.group(1)
        j=k
        while j<end and lines[j]!=ind+'}': j+=1
        n=j-i+1
        note=any(re.search(r'one piece',lines[q],re.I) for q in range(max(0,i-12),i))
        if n>80: out.append((n,rel,i+1,m.group(7),'noted' if note else ''))
out.sort(reverse=True)
for o in out: print(*o)
print(len(out),'over 80;',sum(1 for o in out if not o[4]),'without a note',file=sys.stderr)
