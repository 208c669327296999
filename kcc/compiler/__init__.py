"""The compiler: circuits -> ir -> lower + passes -> plan -> emit -> build -> runtime -> xray."""
