"""What a chunk's path is searched by: its words, and those of a well-known file name.

A path's words are ``tokenize``'s (``services/payments/client.go``: servic, payment,
client, go), but a build or deploy file's name is one word that no question says:
"how is the Docker image built" never spells ``dockerfile``, "the make target" never
``makefile``. Such a name (``NAMED``), as the file's name or one of its dot-separated
parts (``Dockerfile.dev``, ``payments.Dockerfile``, ``Makefile.am``), adds the words
people use for what the file holds. A fixed table, not a rule that splits off a
trailing ``file``: that would make ``profile`` "pro" and ``outfile`` "out".

No module of hostd's reads this: only the ``files`` index's terms (``_terms_of``) and
the tag its cached terms are keyed by (``_index._TERMS_TAG``).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from hostd.chunking import tokenize

__all__ = ["NAMED", "path_terms"]

#: A well-known file name (lower case) and the words for what it holds, tokenized as a
#: query's words are. A Dockerfile or Containerfile is how an image is built; a Makefile
#: holds make's targets.
NAMED: dict[str, str] = {
    "dockerfile": "docker image",
    "containerfile": "container image",
    "makefile": "make target",
    "gnumakefile": "make target",
    "cmakelists": "cmake",
    "jenkinsfile": "jenkins pipeline",
    "vagrantfile": "vagrant",
    "gemfile": "gem dependencies",
    "rakefile": "rake task",
    "pipfile": "pip dependencies",
    "brewfile": "brew",
    "procfile": "process",
}


def path_terms(rel: str) -> list[str]:
    """The terms of the path ``rel`` (POSIX, relative to the root): its words
    (``tokenize``), then the words of a well-known name it has (``NAMED``)."""
    terms = tokenize(rel)
    for part in PurePosixPath(rel).name.lower().split("."):
        words = NAMED.get(part)
        if words is not None:
            terms.extend(tokenize(words))
    return terms
