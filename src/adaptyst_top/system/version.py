"""The installed version, for every command's --version."""


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("adaptyst-top")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0+unknown"
