"""The installed version, for every command's --version."""

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("adaptyst-top")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0+unknown"
