"""The compiled parts of veriloop: the skeleton's page walk, the compact page's, the DOM hash's
digest and the request body's scan (everything else is in pyproject.toml)."""

import lxml
from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [
            Extension(
                "veriloop.engines.skeleton_walk",
                ["engines/skeleton_walk.pyx"],
                include_dirs=lxml.get_include(),  # lxml's public C API and libxml2's headers
                depends=["engines/utf8_space.pxi"],
            ),
            Extension(
                "veriloop.engines.compact_walk",
                ["engines/compact_walk.pyx"],
                include_dirs=lxml.get_include(),
                depends=["engines/utf8_space.pxi"],
            ),
            Extension("veriloop.engines.page_hash", ["engines/page_hash.pyx"]),
            Extension("veriloop.schemas.json_marks", ["schemas/json_marks.pyx"]),
        ],
        language_level=3,
    )
)
