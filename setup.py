"""Builds the Python package with the project's CMake build (setuptools drives it; see docs/python.md):
the extension module, the SentencePiece helper it runs and the leanseq executable that
leanseq.train() runs, all placed inside the package, where the module finds them. CMake builds in build-python/, beside build/ so that ccache finds what
scripts/build.sh compiled (paths are hashed relative to the build directory); setuptools' own
files go to build-python/setuptools/."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
(ROOT / "build-python" / "setuptools").mkdir(parents=True, exist_ok=True)  # setuptools' build and egg-info
VERSION = re.search(r"project\(leanseq VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)


class CMakeBuild(build_ext):
    """Configures and builds the module's targets only (no tests or benchmarks)."""

    def build_extension(self, ext):
        build = ROOT / "build-python"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
                        "-DLEANSEQ_BUILD_TESTS=OFF", "-DLEANSEQ_BUILD_BENCH=OFF", "-DLEANSEQ_PYTHON=ON",
                        f"-DPYTHON_EXECUTABLE={sys.executable}"], check=True)
        subprocess.run(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2),
                        "--target", "leanseq_python", "leanseq-spm", "leanseq"], check=True)
        module = pathlib.Path(self.get_ext_fullpath(ext.name))
        module.parent.mkdir(parents=True, exist_ok=True)
        built = next((build / "python" / "leanseq").glob("_leanseq*.so"))
        shutil.copyfile(built, module)
        # Beside the module, where it looks first; an editable install (pip install -e .) imports
        # the package from the source tree, so the helper goes there too.
        places = [module.parent]
        if getattr(self, "editable_mode", False) or self.inplace:
            places.append(ROOT / "src" / "leanseq" / "python" / "leanseq")
        for place in places:
            for built_file, name in ((build / "leanseq-spm", "leanseq-spm"), (build / "leanseq", "_bin/leanseq")):
                target = place / name
                target.parent.mkdir(exist_ok=True)
                shutil.copyfile(built_file, target)
                target.chmod(0o755)


setup(
    version=VERSION,
    packages=["leanseq"],
    package_dir={"leanseq": "src/leanseq/python/leanseq"},
    package_data={"leanseq": ["__init__.pyi", "py.typed"]},
    ext_modules=[Extension("leanseq._leanseq", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-python/setuptools"}, "egg_info": {"egg_base": "build-python/setuptools"}},
    zip_safe=False,
)
