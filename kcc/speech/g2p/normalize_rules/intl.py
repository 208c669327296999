TABLES = {}
