/* placeholder: the PostgreSQL store lands here */
typedef int store_pg_placeholder;
