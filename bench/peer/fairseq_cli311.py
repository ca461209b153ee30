#!/usr/bin/python3
"""Runs one of fairseq 0.12.2's command-line tools on Debian 12 (Python 3.11, python3-torch 1.13).

    FAIRSEQ_SRC=/path/to/fairseq python3 fairseq_cli311.py train|generate|preprocess|interactive|score|eval-lm|validate [flags]

fairseq 0.12.2 does not start there as released; this launcher changes the process, never the
source tree (see README.md beside it):
  1. dataclass defaults: fairseq's configs hold instances of other config dataclasses as field
     defaults, which Python 3.11 rejects ("mutable default ... use default_factory"), because a
     dataclass with eq=True is unhashable. Dataclasses made after this launcher starts keep
     object's identity hash, so those defaults are accepted as they were on Python <= 3.10.
  2. torch version and BetterTransformer: Debian's torch calls itself 1.13.0a0, and fairseq's
     BetterTransformer check turns each dotted part into an int and fails on "0a0"; the version is
     given as 1.13.0. With any torch 1.13, the encoder's fast inference path then fails
     ("Mask Type should be defined": fairseq 0.12.2 calls torch._transformer_encoder_layer_fwd
     with the arguments of torch 1.12), so encoder layers are built with that path off and
     evaluate as they train, as they do with torch < 1.12.
  3. hydra-core (not in Debian): fairseq uses only hydra's config store and compose() to turn its
     argparse flags into an OmegaConf tree. hydra_standin below does that with OmegaConf alone.
  4. sacrebleu (not in Debian): fairseq imports it when it loads its scorers; it is never used
     here (BLEU is scored by leanseq score), so a module that names its version stands in.
"""
import ast
import contextlib
import dataclasses
import os
import sys
import types


def keep_identity_hash():
    original = dataclasses.dataclass

    def dataclass(cls=None, /, **kwargs):
        def wrap(c):
            made = original(c, **kwargs)
            if made.__hash__ is None:
                made.__hash__ = object.__hash__
            return made

        return wrap if cls is None else wrap(cls)

    dataclasses.dataclass = dataclass


class ConfigStore:
    """hydra.core.config_store.ConfigStore: nodes by (group, name)."""

    _instance = None

    def __init__(self):
        self.nodes = {}

    @classmethod
    def instance(cls):
        if cls._instance is None:
            cls._instance = ConfigStore()
        return cls._instance

    def store(self, name, node, group=None, package=None, provider=None):
        self.nodes[(group, name)] = node


class GlobalHydra:
    @classmethod
    def instance(cls):
        return cls()

    def clear(self):
        pass


@contextlib.contextmanager
def initialize(config_path=None, **_):
    yield


def parse_value(text):
    """A value as fairseq writes it into an override: null, '' or 'quoted', else a Python literal."""
    if text == "null":
        return None
    if len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        return text[1:-1].replace("\\'", "'")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def compose(config_name, overrides=(), strict=None):
    """The structured config stored as config_name, fairseq's config.yaml group defaults, then the
    overrides in order: 'group=name' selects a stored node, 'a.b=value' sets a value."""
    from omegaconf import OmegaConf

    store = ConfigStore.instance().nodes
    cfg = OmegaConf.structured(store[(None, config_name)])
    OmegaConf.set_struct(cfg, False)
    defaults = {"criterion": "cross_entropy", "lr_scheduler": "fixed"}
    for group, name in defaults.items():
        cfg[group] = OmegaConf.structured(store[(group, name)])
    for item in overrides:
        key, _, text = item.partition("=")
        if "." not in key and (key, text) in store:
            cfg[key] = OmegaConf.structured(store[(key, text)])
        else:
            OmegaConf.update(cfg, key, parse_value(text), merge=False)
    return cfg


def install_hydra_standin():
    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    module("hydra")
    module("hydra.core")
    module("hydra.core.config_store", ConfigStore=ConfigStore)
    module("hydra.core.global_hydra", GlobalHydra=GlobalHydra)
    module("hydra.experimental", compose=compose, initialize=initialize)


def install_sacrebleu_standin():
    m = types.ModuleType("sacrebleu")
    m.__version__ = "1 (a stand-in: BLEU is scored by leanseq score)"  # fairseq reads the major version
    sys.modules["sacrebleu"] = m


def prepare_fairseq():
    """Makes fairseq (from $FAIRSEQ_SRC) importable in this process with the changes above."""
    src = os.environ.get("FAIRSEQ_SRC")
    if not src or not os.path.isfile(os.path.join(src, "fairseq", "__init__.py")):
        sys.stderr.write("FAIRSEQ_SRC must name a fairseq 0.12.2 source tree (got %r)\n" % src)
        raise SystemExit(2)
    keep_identity_hash()
    install_hydra_standin()
    install_sacrebleu_standin()
    import torch
    from torch.torch_version import TorchVersion

    torch.__version__ = TorchVersion(torch.__version__.split("a")[0].split("+")[0])
    sys.path.insert(0, src)

    from fairseq.modules import transformer_layer

    layer = transformer_layer.TransformerEncoderLayerBase
    build = layer.__init__

    def build_without_fast_path(self, *args, **kwargs):
        build(self, *args, **kwargs)
        self.can_use_fastpath = False

    layer.__init__ = build_without_fast_path


def main():
    tools = {"train": "fairseq_cli.train", "generate": "fairseq_cli.generate",
             "preprocess": "fairseq_cli.preprocess", "interactive": "fairseq_cli.interactive",
             "score": "fairseq_cli.score", "eval-lm": "fairseq_cli.eval_lm",
             "validate": "fairseq_cli.validate"}
    if len(sys.argv) < 2 or sys.argv[1] not in tools:
        sys.stderr.write("usage: fairseq_cli311.py {%s} [fairseq flags]\n" % "|".join(tools))
        return 2
    prepare_fairseq()
    import importlib

    tool = importlib.import_module(tools[sys.argv[1]])
    sys.argv = ["fairseq-" + sys.argv[1]] + sys.argv[2:]
    tool.cli_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
