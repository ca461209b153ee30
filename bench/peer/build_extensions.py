#!/usr/bin/python3
"""Builds, in place, the three C extensions of fairseq 0.12.2 that training and generation load:
the Cython batching helpers (fairseq.data.data_utils_fast, token_block_utils_fast) and the BLEU
scorer fairseq-generate prints with (fairseq.libbleu). Run in the root of a copy of the tree;
fairseq's own setup.py would also compile its CUDA and libnat extensions, which these runs do not use.
"""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

cpp = dict(language="c++", extra_compile_args=["-std=c++11", "-O2"])
extensions = cythonize(
    [Extension("fairseq.data." + name, ["fairseq/data/%s.pyx" % name], include_dirs=[numpy.get_include()], **cpp)
     for name in ("data_utils_fast", "token_block_utils_fast")],
    language_level="3", quiet=True)
extensions.append(Extension("fairseq.libbleu", ["fairseq/clib/libbleu/libbleu.cpp", "fairseq/clib/libbleu/module.cpp"], **cpp))
setup(name="fairseq-extensions", ext_modules=extensions, script_args=["build_ext", "--inplace"])
