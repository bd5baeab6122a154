/* test_optable.c - walks the op table and fails when a record is incomplete or
 * inconsistent: every op must be reachable by name, have inference and a reference
 * kernel, a sane arity and attribute schema, elementwise ops their scalar kernels, and
 * reductions their computation as data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops/ops.h"

#include <stdio.h>

static void test_every_record_complete(void **state) {
    (void)state;
    for (int i = 0; i < TG_OP_COUNT; i++) {
        const tg_op_def *op = tg_op_table[i];
        assert_non_null(op);
        assert_non_null(op->name);
        print_message("checking %s\n", op->name);
        assert_int_equal(tg_op_lookup(op->name), i);
        assert_non_null(op->infer);
        assert_non_null(op->ref);
        assert_true(op->min_in >= 0);
        assert_true(op->max_in < 0 || op->max_in >= op->min_in);
        assert_true(op->nout != 0);
        assert_true(op->nout <= TG_MAX_OUTS);
        assert_true(op->kind <= TG_KIND_OTHER);
        assert_true(op->nattrs >= 0);
        assert_true(op->nattrs == 0 || op->attrs != NULL);
        for (int a = 0; a < op->nattrs; a++) {
            const tg_attr_spec *s = &op->attrs[a];
            assert_non_null(s->name);
            assert_true(s->type <= TG_AS_DATA);
            /* op data is made by the library: required, and the record names its table */
            if (s->type == TG_AS_DATA) {
                assert_true(s->required);
                assert_non_null(op->data);
            }
            for (int b = 0; b < a; b++) assert_string_not_equal(s->name, op->attrs[b].name);
            /* an optional attribute needs a default of a kind that fits, or none */
            if (!s->required && s->def.kind == TG_ATTR_NONE) assert_true(s->nullable);
        }
        /* every op decides its gradient: a VJP, none (integer/bool results), or undefined */
        assert_int_not_equal(op->grad, TG_GRAD_MISSING);
        assert_true(op->grad <= TG_GRAD_UNDEFINED);
        if (op->grad == TG_GRAD_VJP) assert_non_null(op->vjp);
        /* properties as data: a reduction states its computation (test_opdata.c checks it
         * against the reference kernel), values stay within their enums */
        if (op->kind == TG_KIND_REDUCE) assert_int_not_equal(op->reduce.combine, TG_RED_NONE);
        assert_true(op->reduce.combine <= TG_RED_AND);
        assert_true(op->reduce.fin <= TG_FIN_LOG_SOFTMAX);
        assert_true(op->blas <= TG_BLAS_GER);
        assert_int_equal(
            op->effects & ~(unsigned)(TG_EFFECT_NOFOLD | TG_EFFECT_STATE | TG_EFFECT_AXIS), 0);
        if (op->effects & TG_EFFECT_AXIS) { /* the axis it reads: a required `axis_name` */
            bool named = false;
            for (int a = 0; a < op->nattrs; a++)
                named = named || (strcmp(op->attrs[a].name, "axis_name") == 0 &&
                                  op->attrs[a].type == TG_AS_STR && op->attrs[a].required);
            assert_true(named);
        }
        if (op->kind == TG_KIND_ELEMWISE && op->ref == tg_ew_ref) {
            assert_true(op->ew.f != NULL || op->ew.i != NULL);
            assert_true(op->ew.flags != 0);
            if (op->ew.flags & TG_EW_FLOAT) assert_non_null(op->ew.f);
            /* integer/bool inputs are either computed as such or cast to float first */
            if ((op->ew.flags & (TG_EW_INT | TG_EW_BOOL)) && !(op->ew.flags & TG_EW_TOFLOAT))
                assert_non_null(op->ew.i);
        }
    }
}

static void test_names_unique(void **state) {
    (void)state;
    for (int i = 0; i < TG_OP_COUNT; i++)
        for (int j = 0; j < i; j++)
            assert_string_not_equal(tg_op_table[i]->name, tg_op_table[j]->name);
    assert_int_equal(tg_op_lookup("no_such_op"), -1);
}

/* docs/ops.md must list every op (tests run from tests/). */
static void test_every_op_documented(void **state) {
    (void)state;
    FILE *f = fopen("../docs/ops.md", "rb");
    assert_non_null(f);
    static char doc[1 << 18];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    for (int i = 0; i < TG_OP_COUNT; i++) {
        char key[64];
        snprintf(key, sizeof key, "| `%s` |", tg_op_table[i]->name);
        if (!strstr(doc, key))
            print_error("docs/ops.md does not document '%s'\n", tg_op_table[i]->name);
        assert_non_null(strstr(doc, key));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_record_complete),
        cmocka_unit_test(test_names_unique),
        cmocka_unit_test(test_every_op_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
