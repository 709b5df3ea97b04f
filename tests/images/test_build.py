"""scripts/build-images: its output, its cache, and the names the archives load under."""

from __future__ import annotations

import pytest

from tests.support.images import LOGIN_IMAGE, SUP_IMAGE, Images, build_images, cached_images, reference_name

pytestmark = pytest.mark.timeout(1800)  # the first test may build the images


def test_archives_load_under_the_names_the_chart_and_the_kube_target_use(images: Images) -> None:
    assert reference_name(images.sup) == SUP_IMAGE == "localhost/sup:0.1.0"
    assert reference_name(images.login) == LOGIN_IMAGE == "localhost/sup-login:0.1.0"
    assert images.sup.parent.name == "images" and images.sup.name.startswith("sup-")


def test_an_unchanged_checkout_builds_nothing(images: Images) -> None:
    assert cached_images() == images.archives
    written = {name: path.stat().st_mtime_ns for name, path in images.archives.items()}
    assert build_images().archives == images.archives
    assert {name: path.stat().st_mtime_ns for name, path in images.archives.items()} == written
