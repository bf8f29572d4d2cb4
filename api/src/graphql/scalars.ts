import { GraphQLScalarType, Kind, valueFromASTUntyped } from 'graphql';

/** ISO 8601 UTC strings out; ISO strings accepted in. */
export const DateTimeScalar = new GraphQLScalarType({
  name: 'DateTime',
  serialize(value) {
    if (value instanceof Date) return value.toISOString();
    if (typeof value === 'string') return value;
    if (typeof value === 'number') return new Date(value).toISOString();
    throw new TypeError('DateTime cannot represent this value');
  },
  parseValue(value) {
    if (typeof value !== 'string' || Number.isNaN(Date.parse(value)))
      throw new TypeError('DateTime must be an ISO 8601 string');
    return new Date(value).toISOString();
  },
  parseLiteral(ast) {
    if (ast.kind !== Kind.STRING || Number.isNaN(Date.parse(ast.value)))
      throw new TypeError('DateTime must be an ISO 8601 string');
    return new Date(ast.value).toISOString();
  },
});

/** Any JSON value: event data, tags. */
export const JSONScalar = new GraphQLScalarType({
  name: 'JSON',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: (ast, variables) => valueFromASTUntyped(ast, variables),
});
